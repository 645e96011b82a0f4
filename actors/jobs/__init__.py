"""Background jobs and cron.

- ``actor``: ``Jobs``/``JobsHandle``: the Jobs actor, and ``JobsRunner``, the harness adapter.
- ``table``: ``fold_jobs``, ``JobRecord``, ``job_views``, ``notification``: the job table, pure.
- ``proc``: job process plumbing: ``spawn``, ``same_process``, ``pidfd``, ``signal_job``.
- ``cron``: ``parse_cron``, ``fold_crons``, ``due``: cron expressions and the cron table, pure.
- ``scheduler``: ``Scheduler``/``SchedulerHandle``: the cron actor; ``schedule_cron``,
  ``cancel_cron``.
"""

__all__ = ["actor", "cron", "proc", "scheduler", "table"]
