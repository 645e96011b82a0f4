"""Scripted team scenarios (``scenarios/<name>/``), their runner and checker, ``teamctl demo``.

- ``model``: ``Scenario``, ``load_scenario``/``find_scenario``: the scenario file, parsed strictly.
- ``run``: ``run_scenario``, ``execute``: a fresh repository, the real runtime, then the checks.
- ``check``: ``check_all``: every expectation of a finished run as one ``Check``.
- ``report``: ``render_result``/``render_list``: a rich table, or JSON.
- ``demo``: ``run_demo``: the parallel-refactor scenario with the live view.

Internal: ``facts`` (what a finished run left behind) and ``invariants`` (named invariants).
"""

__all__ = ["check", "demo", "model", "report", "run"]
