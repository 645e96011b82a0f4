"""Benchmarks: one script per area, each printing one JSON object of figures and exiting
non-zero when a figure misses its target. ``python -m benchmarks`` runs them all."""
