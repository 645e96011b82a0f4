"""``FileTranscripts``, the file backend's ``TranscriptStore`` (mailboxes/transcripts.py): what
the hosting process wrote under ``.team/`` read back through the port, names checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.ports import Message, TextBlock
from harness.transcript import Transcript, fold_transcript
from mailboxes.ports import TranscriptStore
from mailboxes.transcripts import FileTranscripts


def _store(tmp_path: Path) -> FileTranscripts:
    return FileTranscripts(tmp_path / "transcripts", tmp_path / "jobs")


def test_missing_folders_are_empty(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert isinstance(store, TranscriptStore)
    assert store.agents() == []
    assert store.transcript("ann") is None
    assert store.job_output("job_1", tail=10) is None


def test_transcripts_written_by_the_harness_read_back(tmp_path: Path) -> None:
    writer = Transcript.for_agent(tmp_path / "transcripts", "ann", fsync=False)
    writer.message(Message(role="user", content=(TextBlock(text="hello"),)))
    writer.close()
    (tmp_path / "transcripts" / "notes.txt").write_text("not a transcript")
    (tmp_path / "transcripts" / "bad name!.jsonl").write_text("")
    store = _store(tmp_path)
    assert store.agents() == ["ann"]
    raw = store.transcript("ann")
    assert raw is not None
    loaded = fold_transcript(raw.decode(), "ann")
    assert [m.content[0].text for m in loaded.messages] == ["hello"]  # type: ignore[union-attr]


def test_job_output_is_the_tail_and_the_whole_size(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job_1.log").write_bytes(b"0123456789")
    store = _store(tmp_path)
    assert store.job_output("job_1", tail=4) == (b"6789", 10)
    assert store.job_output("job_1", tail=100) == (b"0123456789", 10)


@pytest.mark.parametrize("name", ["../x", "a/b", "", "../../etc/passwd"])
def test_names_cannot_leave_their_folder(tmp_path: Path, name: str) -> None:
    store = _store(tmp_path)
    with pytest.raises(ValueError):
        store.transcript(name)
    with pytest.raises(ValueError):
        store.job_output(name, tail=10)
