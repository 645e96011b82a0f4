"""actors.runtime.runtime."""
