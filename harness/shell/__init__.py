"""harness.shell.parse."""
