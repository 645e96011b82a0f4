"""Git worktrees of a team: one per task, created, bound, merged and removed by one actor.

- ``actor``: ``Worktrees``/``WorktreesHandle``: the actor that owns every git write of a team.
- ``messages``: the actor's messages and the values it answers with.
- ``git``: ``Git``: plain, hardened git calls; ``parse_worktree_list``.
- ``confine``: ``confine_policy``/``confined_context``: a teammate confined to its worktree.
- ``merge``: ``merge_one``: a completed task's branch into the main checkout's branch.
- ``reconcile``: ``reconcile``: ``git worktree list`` against the journal.
- ``remote``: ``BranchSharing``, ``push_branch``, ``fetch_completed``: branches across hosts.
"""

__all__ = ["actor", "confine", "git", "merge", "messages", "reconcile", "remote"]
