"""Workflows: saved multi-agent scripts whose ``agent()`` steps are tasks on the board, recorded
in the journal and resumable (docs/ARCHITECTURE.md, "Workflows").

- ``loader``: finding and loading a workflow file (``META`` and ``async def run(ctx, args)``);
- ``context``: what a script sees (``WorkflowContext``: ``agent``, ``parallel``, ``pipeline``,
  ``phase``, ``log``, ``workflow``) and the stable step keys;
- ``record``: the ``workflow.*`` journal events written and folded into runs;
- ``engine``: a run on the team: steps as tasks, results from their completion, resume;
- ``tools``: the tool set a step's worker may use (``StepTools``);
- ``examples/``: workflows shipped with teamctl.
"""
