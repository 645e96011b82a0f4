"""The error family of the harness: one base, caught once in the loop or at the CLI edge."""

from __future__ import annotations


class HarnessError(Exception):
    """Base of every error raised by ``harness``."""


class ModelError(HarnessError):
    """The model call failed after recovery was exhausted (or could not be retried)."""

    def __init__(self, message: str, *, kind: str = "api_error", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class ModelAuthError(ModelError):
    """The API refused the credentials (401) or what they may do (403): never retried, and a
    member failing with it is not restarted (waiting does not fix a key)."""


class ModelConnectionError(ModelError):
    """The Messages API could not be reached within the connection budget (the message names
    the base URL)."""


class PromptTooLong(ModelError):
    """The request exceeds the model's context window (the loop compacts once and retries)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="prompt_too_long", status=400)


class ScriptError(HarnessError):
    """The scripted model was called when no step or rule matched, or a step went unconsumed."""


class ToolInputError(HarnessError):
    """Tool input from the model did not validate (returned to the model as a tool error)."""
