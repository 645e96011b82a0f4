"""Output cap and content-addressed spill."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.tools.outputs import BoundedCapture, cap_text, spill_bytes


def test_spill_is_content_addressed_and_idempotent(tmp_path: Path) -> None:
    data = b"some output" * 100
    first = spill_bytes(data, tmp_path / "out")
    assert first == tmp_path / "out" / hashlib.sha256(data).hexdigest()
    assert first.read_bytes() == data
    assert spill_bytes(data, tmp_path / "out") == first
    assert [p.name for p in (tmp_path / "out").iterdir()] == [first.name]


def test_cap_text_keeps_small_text_and_previews_large(tmp_path: Path) -> None:
    assert cap_text("short", max_chars=10, outputs_dir=tmp_path) == "short"
    assert list(tmp_path.iterdir()) == []
    text = "".join(f"{i}\n" for i in range(10_000))
    capped = cap_text(text, max_chars=500, outputs_dir=tmp_path)
    spilled = tmp_path / hashlib.sha256(text.encode()).hexdigest()
    assert spilled.read_text() == text
    assert capped.startswith("0\n1\n2\n") and capped.endswith("9998\n9999\n")
    assert f"full output saved to {spilled}" in capped
    [notice] = [line for line in capped.splitlines() if "omitted" in line]
    assert len(capped) == 500 + len(notice) + 2


def test_capture_small_stream_stays_in_memory(tmp_path: Path) -> None:
    cap = BoundedCapture(tmp_path, head_bytes=10, tail_bytes=10)
    for chunk in (b"hello ", b"", b"world"):
        cap.feed(chunk)
    out = cap.close()
    assert (out.head + out.tail, out.total_bytes, out.spill_path) == (b"hello world", 11, None)
    assert not out.truncated and out.render() == "hello world"
    assert list(tmp_path.iterdir()) == []


def test_capture_large_stream_keeps_head_tail_and_spills_all(tmp_path: Path) -> None:
    cap = BoundedCapture(tmp_path / "o", head_bytes=5, tail_bytes=4)
    data = bytes(range(256)) * 40
    for i in range(0, len(data), 7):
        cap.feed(data[i : i + 7])
    out = cap.close()
    assert out.truncated and out.total_bytes == len(data)
    assert out.head == data[:5] and out.tail == data[-4:]
    assert out.spill_path is not None and out.spill_path.read_bytes() == data
    assert out.spill_path.name == hashlib.sha256(data).hexdigest()
    assert f"[... {len(data) - 9} bytes omitted of {len(data)}" in out.render()


def test_capture_without_dir_or_discarded_leaves_nothing(tmp_path: Path) -> None:
    cap = BoundedCapture(None, head_bytes=2, tail_bytes=2)
    cap.feed(b"abcdefgh")
    out = cap.close()
    assert (out.head, out.tail, out.spill_path) == (b"ab", b"gh", None)
    assert "full output not saved" in out.render()
    dropped = BoundedCapture(tmp_path, head_bytes=2, tail_bytes=2)
    dropped.feed(b"abcdefgh")
    dropped.discard()
    assert list(tmp_path.iterdir()) == []
