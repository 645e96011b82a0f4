"""``teamctl doctor`` (docs/SCALE-OUT.md, "Checking a cluster"): the server version, the team's
stream replicas against the cluster size, and whether the server syncs every write, against real
nats-servers from the wheel; exit 1 when a check fails."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors.cli.cli_support import git_repo, ok, run
from tests.actors.cli.test_backend_cli import _OldServer
from tests.support.nats_server import (
    ClusterNode,
    NatsCluster,
    NatsServer,
    free_ports,
    require_nats,
    running_cluster,
    running_server,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMCTL_BACKEND", raising=False)


class _Monitored(ClusterNode):
    """One server outside a cluster with a monitoring endpoint, syncing every write or not."""

    def __init__(self, root: Path, *, sync_always: bool) -> None:
        port, cluster_port, http_port = free_ports(3)
        super().__init__(
            root,
            require_nats(),
            "solo",
            port=port,
            cluster_port=cluster_port,
            http_port=http_port,
            routes=[],
        )
        self.sync_always = sync_always

    @property
    def monitor(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def write_config(self) -> None:
        self.config.write_text(
            "\n".join(
                [
                    "host: 127.0.0.1",
                    f"port: {self.port}",
                    f'http: "127.0.0.1:{self.http_port}"',
                    f"log_file: {json.dumps(str(self.log))}",
                    "jetstream {",
                    f"  store_dir: {json.dumps(str(self.store_dir))}",
                    *(["  sync_interval: always"] if self.sync_always else []),
                    "}",
                    "",
                ]
            )
        )


def _monitored(root: Path, sync_always: bool) -> Iterator[_Monitored]:
    node = _Monitored(root, sync_always=sync_always)
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_server(tmp_path / "nats")


def _checks(result_stdout: str) -> dict[str, list[tuple[str, str]]]:
    doc = json.loads(result_stdout)
    found: dict[str, list[tuple[str, str]]] = {}
    for check in doc["checks"]:
        found.setdefault(check["check"], []).append((check["status"], check["detail"]))
    return found


def test_doctor_on_a_file_team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = git_repo(tmp_path, monkeypatch)
    out = ok(["doctor"]).stdout
    assert "backend file" in out
    assert "OK      journal: 1 events" in out
    # A journal damaged mid-file fails the check.
    journal = root / ".team" / "journal.jsonl"
    ok(["task", "add", "one"])
    lines = journal.read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b"team.created", b"team.crEated")
    journal.write_bytes(b"\n".join(lines))
    result = run(["doctor", "--json"])
    assert result.exit_code == 1
    assert _checks(result.stdout)["journal"][0][0] == "fail"


def test_doctor_on_a_single_server_without_a_monitor(
    tmp_path: Path, server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo(tmp_path, monkeypatch, init=False)
    ok(["init", "--backend", f"{server.url}/demo"])
    result = run(["doctor", "--json"])
    assert result.exit_code == 0, result.output
    checks = _checks(result.stdout)
    (status, detail), *_ = checks["server"]
    assert status == "ok" and "nats-server 2.1" in detail
    replicas = dict((d.split(":")[0], s) for s, d in checks["replicas"])
    assert replicas["TEAMCTL_demo_JOURNAL"] == "ok"
    assert all(s == "ok" for s in replicas.values())
    assert checks["sync"] == [
        ("unknown", "unknown; pass --monitor http://HOST:PORT (the server's http_port)")
    ]
    text = ok(["doctor"]).stdout
    assert "UNKNOWN sync" in text and "1 replica(s), cluster of 1 server (1 wanted)" in text


@pytest.mark.parametrize("sync_always", [True, False])
def test_doctor_reads_sync_interval_from_the_monitoring_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync_always: bool
) -> None:
    git_repo(tmp_path, monkeypatch, init=False)
    for node in _monitored(tmp_path / "solo", sync_always):
        ok(["init", "--backend", f"{node.url}/demo"])
        result = run(["doctor", "--monitor", node.monitor, "--json"])
        sync = _checks(result.stdout)["sync"]
        if sync_always:
            assert result.exit_code == 0, result.output
            assert sync[0][0] == "ok" and "sync_interval: always" in sync[0][1]
        else:
            assert result.exit_code == 1
            assert sync[0][0] == "fail" and "sync_interval 120s, not always" in sync[0][1]


def test_doctor_refuses_a_server_older_than_2_12(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("nats")
    root = git_repo(tmp_path, monkeypatch)
    old = _OldServer()
    try:
        settings = root / ".team" / "settings.json"
        raw = json.loads(settings.read_text())
        raw["backend"] = f"nats://127.0.0.1:{old.port}/demo"
        settings.write_text(json.dumps(raw))
        result = run(["doctor"])
    finally:
        old.close()
    assert result.exit_code == 1
    assert "FAIL    server: nats-server 2.9.10" in result.stdout
    assert "too old" in result.stdout


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    yield from running_cluster(tmp_path / "cluster")


def test_doctor_compares_replicas_with_the_cluster_size(
    tmp_path: Path, cluster: NatsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mailboxes.journal.nats import NatsEventStore

    git_repo(tmp_path, monkeypatch, init=False)
    ok(["init", "--backend", f"{cluster.url}/wide"])
    monitor = f"http://127.0.0.1:{cluster.nodes[0].http_port}"
    result = run(["doctor", "--monitor", monitor, "--json"])
    checks = _checks(result.stdout)
    replicas = {d.split(":")[0]: (s, d) for s, d in checks["replicas"]}
    status, detail = replicas["TEAMCTL_wide_JOURNAL"]
    assert status == "ok"
    assert "3 replica(s), cluster of 3 servers (3 wanted)" in detail
    assert replicas["KV_TEAMCTL_wide_MEMBERS"][0] == "ok"
    assert checks["sync"][0][0] == "ok"
    # Every stream of the team (the mailboxes too) keeps 3 copies: every check passes.
    assert replicas["TEAMCTL_wide_MAIL"][0] == "ok"
    assert not [d for found in checks.values() for s, d in found if s == "fail"]
    assert result.exit_code == 0

    # A team whose journal stream keeps one copy on a 3-node cluster fails the check.
    NatsEventStore(cluster.urls, "thin", replicas=1).close()
    monkeypatch.setenv("TEAMCTL_BACKEND", f"{cluster.url}/thin")
    result = run(["doctor", "--json"])
    assert result.exit_code == 1
    journal = [s for s, d in _checks(result.stdout)["replicas"] if "TEAMCTL_thin_JOURNAL" in d]
    assert journal == ["fail"]
