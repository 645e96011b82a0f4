import sqlite3

from ledger.accounts import balance, find_account


def test_balance() -> None:
    assert balance([100, -30, 5]) == 75


def test_find_account() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE accounts (id INTEGER, name TEXT)")
    db.execute("INSERT INTO accounts VALUES (1, 'ada')")
    assert find_account(db, "ada") == (1, "ada")
    assert find_account(db, "eve") is None
