"""harness.permissions.checks."""
