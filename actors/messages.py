"""Actor messages: frozen, typed values with a ``kind`` tag, one discriminated union.

Every message an actor receives through ``tell``/``ask`` is defined here (pykka proxies are not
used for domain calls). Values cross threads, so they are immutable: tuples, never lists.
New messages are appended below and added to ``ActorMessage``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from teamctl_base.models import Frozen


class Message(Frozen):
    """Base of every actor message."""


# --- scheduler ---------------------------------------------------------------------------------


class ScheduleCron(Message):
    """Schedule a cron job; the reply is its ``cron_id``. Bad expression or tz → ``CronError``."""

    kind: Literal["schedule_cron"] = "schedule_cron"
    cron: str
    """Five-field cron expression (minute hour day-of-month month day-of-week)."""
    prompt: str
    """What the owner is told when it fires."""
    recurring: bool = True
    """False: fire once at the next slot, then done."""
    tz: str | None = None
    """IANA time zone name, ``"UTC"``, or ``None`` for the machine's local zone."""
    owner: str = "lead"
    """Whose mailbox gets the ``cron_fired`` messages."""


class CancelCron(Message):
    """Cancel a cron job; the reply is True if it was active (unknown id → ``CronError``)."""

    kind: Literal["cancel_cron"] = "cancel_cron"
    cron_id: str


class ListCrons(Message):
    """The reply is a tuple of ``CronView`` (active jobs, with their next firing times)."""

    kind: Literal["list_crons"] = "list_crons"
    include_done: bool = False


class FireDue(Message):
    """Fire every slot that is due by the scheduler's clock (sent by its timer or a test);
    the reply is the tuple of ``(cron_id, slot)`` fired."""

    kind: Literal["fire_due"] = "fire_due"


# --- background jobs ---------------------------------------------------------------------------


class StartJob(Message):
    """Start a background command; the reply is the ``JobView`` of the started job."""

    kind: Literal["start_job"] = "start_job"
    command: str
    cwd: str
    owner: str
    """Whose mailbox gets the ``task_notification`` when it ends."""
    timeout_s: float | None = None
    """None: the Jobs actor's default timeout."""


class JobExited(Message):
    """Sent by a job's waiter thread when its process ended (internal to the Jobs actor)."""

    kind: Literal["job_exited"] = "job_exited"
    job_id: str
    returncode: int | None
    """The exit status (negative: killed by that signal); None when it is not known (re-attached
    process that was not our child)."""
    timed_out: bool = False
    stopped: bool = False
    """True when ``StopAllJobs`` or ``StopJobsOf`` killed it."""


class ListJobs(Message):
    """The reply is a tuple of ``JobView``, running first, then the most recent finished."""

    kind: Literal["list_jobs"] = "list_jobs"


class StopAllJobs(Message):
    """Kill every running job's process group (TERM, grace, KILL) and wait for each; the reply
    is the tuple of job ids that were stopped."""

    kind: Literal["stop_all_jobs"] = "stop_all_jobs"
    grace_s: float | None = None
    """None: the Jobs actor's default grace between TERM and KILL."""


class StopJobsOf(Message):
    """Kill the running jobs of one owner (TERM, grace, KILL) and wait for each, as
    ``StopAllJobs`` does; the reply is the tuple of job ids that were stopped."""

    kind: Literal["stop_jobs_of"] = "stop_jobs_of"
    owner: str
    grace_s: float | None = None
    """None: the Jobs actor's default grace between TERM and KILL."""


# --- agent actors (lead, teammates) and the supervisor ---------------------------------------


class Wake(Message):
    """Something may have arrived: re-list the inbox (a hint; duplicates are harmless)."""

    kind: Literal["wake"] = "wake"
    reason: str = "mail"
    """What prompted it (``mail``, ``tick``, ``start``): for logs only."""


class BoardChanged(Message):
    """The task board may have changed: an idle teammate looks for an assignment or a claim."""

    kind: Literal["board_changed"] = "board_changed"


class UserInput(Message):
    """Text typed by the human for the lead: starts a turn, or joins the running one."""

    kind: Literal["user_input"] = "user_input"
    text: str


class Step(Message):
    """Run the next step of turn ``turn`` (an agent actor sends this to itself)."""

    kind: Literal["step"] = "step"
    turn: int


class AgentFailed(Message):
    """To the Supervisor: an agent's turn failed (model error, harness error, crash)."""

    kind: Literal["agent_failed"] = "agent_failed"
    name: str
    error: str
    generation: int = 0
    """Which incarnation of the agent failed (a stale report after a restart is ignored)."""
    restart: bool = True
    """False when restarting cannot help (the API refused the credentials): it stays down."""


ActorMessage = Annotated[
    ScheduleCron
    | CancelCron
    | ListCrons
    | FireDue
    | StartJob
    | JobExited
    | ListJobs
    | StopAllJobs
    | StopJobsOf
    | Wake
    | BoardChanged
    | UserInput
    | Step
    | AgentFailed,
    Field(discriminator="kind"),
]
"""Every actor message (append new kinds here)."""

MESSAGES: TypeAdapter[ActorMessage] = TypeAdapter(ActorMessage)
"""Parses a plain dict into the right message (``MESSAGES.validate_python(data)``)."""
