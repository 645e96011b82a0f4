"""actors.worktrees.actor."""
