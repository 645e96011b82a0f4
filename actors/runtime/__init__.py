"""The team runtime: one process hosting a team's members as actors.

``TeamRuntime`` (``runtime``) is the entry point; it only wires together parts that each own one
concern:

- ``roster``: ``Roster``, who this process hosts and what each member is doing;
- ``hosting``: ``MemberHosting``, starting and stopping the members' incarnations (leases,
  agents, actors) and the ``AgentHost`` of their actors;
- ``services``: ``RuntimeServices``, the ``actors.services.TeamServices`` the team tools call
  (spawn, members, shutdown requests, crons), and ``TaskWorktrees`` (the Worktrees actor,
  worktree locks that follow claims, a worktree per task);
- ``supervision``: the ``Supervisor`` actor and ``Supervision`` (crash records, restarts, the
  disk-full pause: ``DiskWatch`` probing for space, recovery);
- ``background``: the cron Scheduler, background Jobs and MCP servers;
- ``changes``: the file watcher over inboxes and journal, and what each change means;
- ``members``: building a member (plans, model client, policy, tools, harness ``Agent``);
- ``agent_actor``, ``lead``, ``teammate``: the actors driving the agents, and the host
  protocols they need (``AgentHost``, ``TeammateHost``);
- ``permission_requests``, ``policy_journal``: teammates' permission requests, and the journal
  of every denied tool call;
- ``stop``: ``teamctl stop`` from any process; ``process``: the runtime lock, leases, events,
  clock, ids, timers.

Nothing is imported here: ``teamctl --help`` must not pay for pykka or the harness.
"""

__all__ = [
    "agent_actor",
    "background",
    "changes",
    "hosting",
    "lead",
    "members",
    "permission_requests",
    "policy_journal",
    "process",
    "roster",
    "runtime",
    "services",
    "stop",
    "supervision",
    "teammate",
]
