"""What the model sees, and keeping it inside the window.

- ``prompt``: ``SystemPrompt``, ``TokenCounter``, ``check_pairing``, ``spill_oversize``.
- ``compaction``: ``Compactor``: the pipeline that shrinks a conversation near the window's end.
- ``memory``: ``Memory``: notes shared by the agents of one repository (``.team/memory/``).
- ``skills``: ``SkillLibrary``: ``SKILL.md`` files and their catalog.
"""

__all__ = ["compaction", "memory", "prompt", "skills"]
