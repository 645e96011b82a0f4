"""actors.jobs.actor."""
