"""Every agent's model client shares one SDK client (one TLS context, one connection pool):
spawning a teammate loads no CA bundle and opens no new connection pool on its critical path."""

from __future__ import annotations

import pytest

from actors.runtime.members import anthropic_models


def test_the_agents_of_a_runtime_share_one_connection_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # never called here
    make = anthropic_models()
    lead, w1, w2 = make("lead", "m1"), make("w1", "m2"), make("w2", "m2")
    pools = {id(m._client._client) for m in (lead, w1, w2)}  # type: ignore[attr-defined]
    assert len(pools) == 1
    # each keeps its own settings on it: no SDK retries (the model's own), its own model
    assert all(m._client.max_retries == 0 for m in (lead, w1, w2))  # type: ignore[attr-defined]
    assert (lead.model, w1.model) == ("m1", "m2")  # type: ignore[attr-defined]
    # another runtime (another factory) gets its own
    other = anthropic_models()("lead", "m1")
    assert id(other._client._client) not in pools  # type: ignore[attr-defined]
