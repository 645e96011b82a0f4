"""The error family of the team layer: one base, caught once at the CLI edge or by an actor.

A refused claim is not an error: ``Board.claim`` returns a ``ClaimResult`` saying why. These
exceptions are for commands that cannot be carried out as asked.
"""

from __future__ import annotations

from collections.abc import Sequence


class TeamError(Exception):
    """Base of every error raised by ``actors``."""


class UnknownTask(TeamError):
    """A task id that is not on the board."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"unknown task {task_id!r}")
        self.task_id = task_id


class CycleError(TeamError):
    """Adding a dependency edge would close a cycle; ``cycle`` is the path, first id repeated."""

    def __init__(self, cycle: Sequence[str]) -> None:
        super().__init__("dependency cycle refused: " + " -> ".join(cycle))
        self.cycle = tuple(cycle)


class HasDependents(TeamError):
    """Deleting a task that unfinished tasks are blocked by, without ``force``."""

    def __init__(self, task_id: str, dependents: Sequence[str]) -> None:
        names = ", ".join(dependents)
        super().__init__(
            f"task {task_id} blocks {names}; remove the dependency first or delete with force"
        )
        self.task_id = task_id
        self.dependents = tuple(dependents)


class InvalidTransition(TeamError):
    """A command that the task's current status does not allow (e.g. edit a deleted task)."""

    def __init__(self, task_id: str, status: str, action: str) -> None:
        super().__init__(f"cannot {action} task {task_id}: it is {status}")
        self.task_id = task_id
        self.status = status
        self.action = action


class NotOwner(TeamError):
    """A fenced write (complete, release, plan submit) by someone who does not hold the task."""

    def __init__(self, task_id: str, who: str, owner: str | None) -> None:
        held = f"held by {owner}" if owner else "not claimed"
        super().__init__(f"{who} does not hold task {task_id} (it is {held})")
        self.task_id = task_id
        self.who = who
        self.owner = owner


class StaleEpoch(TeamError):
    """A fenced write carrying an epoch older than the task's current claim."""

    def __init__(self, task_id: str, given: int, current: int) -> None:
        super().__init__(
            f"stale claim on task {task_id}: epoch {given} was superseded by epoch {current}"
        )
        self.task_id = task_id
        self.given = given
        self.current = current


class ClaimRefused(TeamError):
    """Raised only by ``ClaimResult.unwrap()``: the claim was refused for ``reason``."""

    def __init__(self, task_id: str | None, reason: str) -> None:
        what = f"task {task_id}" if task_id else "a task"
        super().__init__(f"could not claim {what}: {reason}")
        self.task_id = task_id
        self.reason = reason


class UnknownMember(TeamError):
    """A member name that is not on the team."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown team member {name!r}")
        self.name = name


class DuplicateMember(TeamError):
    """Spawning a member whose name is already taken by a member that has not stopped, or
    differs only in case from an existing member's (``taken``: that member's name)."""

    def __init__(self, name: str, taken: str | None = None) -> None:
        if taken is None or taken == name:
            super().__init__(f"team member {name!r} already exists")
        else:
            super().__init__(
                f"team member {taken!r} already exists (names are case-insensitive): "
                f"pick another name than {name!r}"
            )
        self.name = name
        self.taken = taken or name


class InvalidMemberName(TeamError):
    """A name a new member may not take: unsafe, starting with ``-`` or ``.``, or reserved."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"invalid member name {name!r}: {why}")
        self.name = name
        self.why = why


class LiveMemberRefused(TeamError):
    """A person acting on the work or mail of an agent a running process hosts, without
    ``--force``."""

    def __init__(self, name: str, action: str) -> None:
        super().__init__(
            f"{name} is a live agent hosted by a running teamctl: refusing to {action} by hand "
            f"(stop it with `teamctl stop {name}`, or add --force)"
        )
        self.name = name
        self.action = action


class ProjectionError(TeamError):
    """A projection folder that cannot be read or written."""
