"""The team tools agents call, under the harness tool contract.

- ``toolsets``: ``lead_tools``/``teammate_tools`` and the tool-name lists: what each role gets.
- ``base``: ``TeamTool`` and ``Seat`` (who acts), plus the tools every member has.
- ``lead``: the lead's tools: members, tasks, plans, permission answers, cron.
- ``teammate``: a teammate's task tools: claim, complete, release, submit a plan.
- ``worktree``: the lead's worktree tools: ``create_worktree``, ``merge_worktree``.
- ``hooks``: the team hook events ``TaskCreated``, ``TaskCompleted``, ``TeammateIdle``.
"""

__all__ = ["base", "hooks", "lead", "teammate", "toolsets", "worktree"]
