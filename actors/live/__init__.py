"""The live view of a team (``teamctl watch``, the ``run`` console, ``teamctl demo``).

- ``view``: ``Refresher`` and ``watch_live``, and the names below in one place.
- ``snapshot``: ``Snapshot`` and ``build_snapshot``: the view's data, built by a pure function.
- ``load``: ``LiveSource``: reads a repository incrementally, taking no lock the runtime needs.
- ``render``: ``render(snapshot)``: one rich renderable.
- ``changes``: ``change_lines``/``ChangeLog``: the view as an append-only log, for pipes and files.
- ``text``: ``SafeTable``: rich tables whose cells are escaped plain text, never markup.
"""

__all__ = ["changes", "load", "render", "snapshot", "text", "view"]
