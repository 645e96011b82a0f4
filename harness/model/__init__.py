"""harness.model."""
