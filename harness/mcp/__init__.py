"""harness.mcp."""
