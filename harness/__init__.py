"""teamctl harness package."""
