"""A tiny ledger (a teamctl scenario fixture)."""
