"""Small statistics helpers (a teamctl scenario fixture)."""
