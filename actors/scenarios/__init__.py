"""actors.scenarios."""
