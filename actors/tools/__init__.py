"""actors.tools.toolsets."""
