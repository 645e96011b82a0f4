"""actors.live.view."""
