"""harness.context.prompt."""
