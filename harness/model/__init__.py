"""Model clients (the ``harness.ports.ModelClient`` port) and the Messages API format.

- ``anthropic_client``: ``AnthropicModel``: the real SDK, with retries and recovery.
- ``recovery``: ``classify``: what went wrong with one call, and whether retrying helps.
- ``backoff``: ``BackoffGate``: one backoff for every client of a process.
- ``pricing``: ``cost_usd``: usage into dollars.
- ``wire``: ``harness.ports`` values to and from Messages API JSON.
- ``scripted``: ``ScriptedModel``, ``Script``: the deterministic test and demo model.
- ``fakeapi``: ``FakeMessagesServer``: a local Messages API served by a scripted model.
"""

__all__ = ["anthropic_client", "backoff", "fakeapi", "pricing", "recovery", "scripted", "wire"]
