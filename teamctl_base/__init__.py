"""The bottom layer: what ``mailboxes``, ``harness`` and ``actors`` all share, and nothing else.

- ``teamctl_base.clock``: the production clock and id source (``SystemClock``, ``UuidIds``,
  ``new_id``), the real implementations of the ``Clock`` and ``IdSource`` ports.
- ``teamctl_base.crashpoints``: named crash points for fault tests (``crash_point``, armed by
  ``$TEAMCTL_CRASH_AT``).
- ``teamctl_base.models``: ``Frozen``, the base of every frozen pydantic value.
- ``teamctl_base.records``: ``Record``, frozen values declared like pydantic models that need no
  pydantic for plain values (the event payloads and mailbox envelopes).

This package imports none of the three packages (they may all import it). This file imports
nothing, and ``clock``/``crashpoints``/``records`` only the standard library (``records`` loads
pydantic only for a value it leaves to pydantic), so importing them stays cheap.
"""
