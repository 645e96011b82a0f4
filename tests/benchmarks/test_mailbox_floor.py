"""benchmarks/bench_mailbox.py's disk floor: the bare system calls the one-sender delivery figure
is a ratio to. The floor is honest only if it makes the calls one ``Maildir.deliver`` makes, in
the same order, on files of the same size and names of the same length: no fewer (a stricter
floor than durability needs) and no more (a looser one, e.g. pathlib or extra opens)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_mailbox import BODY, disk_floor, real_message
from mailboxes.maildir import Maildir
from mailboxes.messages import MessageDraft

CALLS = ("open", "write", "close", "link", "unlink", "rename", "stat", "lstat", "listdir")
"""The ``os`` functions that reach the file system and that either side might use."""


_REAL_FSYNC = os.fsync


@contextmanager
def recorded(monkeypatch: pytest.MonkeyPatch, log: list[str]) -> Iterator[None]:
    """Record every call of ``CALLS`` and of ``os.fsync`` by name, in order."""

    def wrap(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            log.append(name)
            return real(*args, **kwargs)

        return call

    with monkeypatch.context() as patch:
        for name in (*CALLS, "fsync"):
            patch.setattr(os, name, wrap(name, getattr(os, name)))
        yield


def test_the_floor_makes_the_system_calls_of_one_delivery_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload, name_length = real_message(tmp_path)
    delivery: list[str] = []

    def fsync(fd: int) -> None:  # the Maildir's fsync seam, bound when it is made
        delivery.append("fsync")
        _REAL_FSYNC(fd)

    box = Maildir(tmp_path / "box", fsync=fsync)
    box.ensure_inbox("bob")
    draft = MessageDraft.text("bob", BODY)
    box.deliver("lead", draft)  # the first delivery loads the envelope models
    delivery.clear()
    with recorded(monkeypatch, delivery):
        box.deliver("lead", draft)
    floor: list[str] = []
    (tmp_path / "floor").mkdir()
    with recorded(monkeypatch, floor):
        disk_floor(tmp_path / "floor", 0, 2, payload, name_length)
    expected = ["open", "write", "fsync", "close", "link", "unlink", "open", "fsync", "close"]
    assert delivery == expected
    setup, timed = floor[: -2 * len(expected)], floor[-2 * len(expected) :]
    assert timed == expected * 2
    assert not {"write", "link", "unlink"} & set(setup)  # folders made before the clock starts


def test_the_floor_writes_real_sized_messages_under_real_length_names(tmp_path: Path) -> None:
    payload, name_length = real_message(tmp_path)
    box = Maildir(tmp_path / "sample")
    [sample] = box.pending("bob")
    assert payload.startswith(b'{"body":{"text":"xxx') and sample.text == BODY
    assert name_length == len(os.listdir(tmp_path / "sample" / "bob" / "new")[0]) >= 60
    rate = disk_floor(tmp_path, 7, 5, payload, name_length)
    assert rate > 0
    new = tmp_path / "floor7" / "bob" / "new"
    assert os.listdir(tmp_path / "floor7" / "bob" / "tmp") == []
    files = sorted(new.iterdir())
    assert len(files) == 5
    assert {len(f.name) for f in files} == {name_length}
    assert {f.read_bytes() for f in files} == {payload}
