"""Accounts of the ledger: balances in cents."""

import sqlite3


def balance(entries: list[int]) -> int:
    """The sum of the entries, in cents."""
    return sum(entries)


def find_account(db: sqlite3.Connection, name: str) -> tuple[int, str] | None:
    """The account row named ``name``."""
    return db.execute("SELECT id, name FROM accounts WHERE name = ?", (name,)).fetchone()
