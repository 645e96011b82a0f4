"""actors.board.board."""
