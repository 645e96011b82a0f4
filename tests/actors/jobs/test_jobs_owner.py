"""``StopJobsOf``: the Jobs actor kills one owner's running jobs and leaves the others running."""

from __future__ import annotations

from tests.actors.jobs.test_jobs import Env, alive, env, stop_actors, wait_gone

__all__ = ["env", "stop_actors"]


def test_only_the_owners_jobs_are_killed_and_recorded(env: Env) -> None:
    jobs = env.start()
    a1 = jobs.start_job("sleep 300", cwd=env.root, owner="alice")
    a2 = jobs.start_job("sleep 301 & wait", cwd=env.root, owner="alice")
    b = jobs.start_job("sleep 302", cwd=env.root, owner="lead")
    assert a1.pid is not None and a2.pid is not None and b.pid is not None

    stopped = jobs.stop_jobs_of("alice", grace_s=0.5)

    assert sorted(stopped) == sorted([a1.job_id, a2.job_id])
    wait_gone(a1.pid)
    wait_gone(a2.pid)
    status = {v.job_id: v.status for v in jobs.list()}
    assert status == {a1.job_id: "killed", a2.job_id: "killed", b.job_id: "running"}
    assert alive(b.pid)
    finished = {e.data["job_id"] for e in env.events("job.finished")}
    assert finished == {a1.job_id, a2.job_id}
    assert jobs.stop_jobs_of("alice") == ()  # nothing left of hers: a no-op
    assert jobs.stop_jobs_of("nobody") == ()
    assert jobs.stop_all(grace_s=0.5) == (b.job_id,)
    wait_gone(b.pid)
