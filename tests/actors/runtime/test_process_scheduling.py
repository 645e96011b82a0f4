"""A team process's CPU policy (``batch_scheduling``, ``team.cpu_scheduling``), checked in real
child processes: the policy of the test runner itself is never changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setscheduler"), reason="CPU policies are Linux's"
)

_PROBE = textwrap.dedent(
    """
    import json, os, subprocess, sys, threading
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))  # the default, whatever ran us
    {before}
    {call}
    seen = {{"main": os.sched_getscheduler(0)}}
    thread = threading.Thread(target=lambda: seen.update(thread=os.sched_getscheduler(0)))
    thread.start()
    thread.join()
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
        capture_output=True, text=True, check=True,
    )
    seen["child"] = int(child.stdout)
    seen["applied"] = applied
    print(json.dumps(seen))
    """
)


def _probe(call: str, before: str = "") -> dict[str, int]:
    code = _PROBE.format(before=before, call=call)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    result: dict[str, int] = json.loads(out.stdout)
    return result


def test_a_team_process_and_what_it_starts_run_under_sched_batch() -> None:
    seen = _probe(
        "from actors.runtime.process import batch_scheduling; applied = batch_scheduling()"
    )
    assert seen == {
        "main": os.SCHED_BATCH,
        "thread": os.SCHED_BATCH,
        "child": os.SCHED_BATCH,
        "applied": True,
    }


def test_a_policy_chosen_from_outside_is_kept() -> None:
    seen = _probe(
        "from actors.runtime.process import batch_scheduling; applied = batch_scheduling()",
        before="os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))",
    )
    assert seen["applied"] is False
    assert seen["main"] == seen["thread"] == seen["child"] == os.SCHED_IDLE


@pytest.mark.parametrize(
    ("setting", "policy"), [("batch", os.SCHED_BATCH), ("normal", os.SCHED_OTHER)]
)
def test_the_cli_follows_team_cpu_scheduling(setting: str, policy: int) -> None:
    call = (
        "from actors.cli.run import _schedule\n"
        "from actors.settings import Settings\n"
        f"_schedule(Settings.model_validate({{'team': {{'cpu_scheduling': '{setting}'}}}}))\n"
        "applied = None"
    )
    seen = _probe(call)
    assert seen["main"] == seen["thread"] == seen["child"] == policy
