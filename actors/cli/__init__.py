"""actors.cli.main."""
