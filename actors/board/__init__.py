"""The task board: team state as a pure fold of the journal, and the commands that change it.

- ``state``: ``TeamState`` and its ``Task``, ``Member``, ``PlanRequest``, ``WorktreeRecord`` values.
- ``fold``: ``fold``/``fold_all``: journal events into a ``TeamState``, pure.
- ``board``: ``Board``: task commands decided under the journal's lock (create, claim, ...).
- ``protocols``: journal commands of plans, shutdown answers and permission requests.
- ``projections``: ``Projections``, ``verify``: ``.tasks/task_<n>.json`` and ``.team/team.json``.

Internal: ``rules`` (the values board commands answer with, the checks their decisions share).
"""

__all__ = ["board", "fold", "projections", "protocols", "state"]
