"""teamctl actors package."""
