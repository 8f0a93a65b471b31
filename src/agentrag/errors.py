"""Error families, and the one failure policy every command applies to its items.

``UserError``: bad input or configuration; the message names the bad value and the fix (exit 2).
``RunError``: something failed while running (LLM, retrieval, parsing); ``is_retryable`` says
whether trying again may help.

:func:`classify` maps any exception raised while working on one item to what the run does with
that item (see docs/concepts.md, "Failure policy"):

- ``outage``: a timeout, a refused or reset connection, a 5xx or 429, a 200 whose body is not a
  valid completion (retried by the backend first): the item is left unfinished, never written,
  and the next run redoes it;
- ``fatal``: an error no retry can fix (401/403/404, an unknown model, an output directory that
  cannot be written, bad input): the run stops at the first one, nothing more is written;
- ``model_limited``: a request the model cannot take (over its context window): data, recorded
  as a flagged record with its reason;
- ``bug``: anything else; the item stays unfinished, the traceback is logged and the command
  exits non-zero.
"""

from __future__ import annotations

import errno
from typing import Literal


class AgentRagError(Exception):
    """Base class of every error agentrag raises on purpose."""


class UserError(AgentRagError):
    """Bad input or configuration. The message says what is wrong and how to fix it."""


class EndpointError(UserError):
    """An endpoint (LLM, judge, retrieval server) refused the request in a way no retry can fix:
    401/403 (token), 404 (URL or model name), an unknown model. The message names the endpoint
    and the fix; the run stops at the first one."""

    def __init__(self, message: str, *, endpoint: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.endpoint, self.status = endpoint, status


class StorageError(UserError):
    """The run directory cannot be written (read-only file system, permission, disk full). The
    items in flight stay unfinished; rerun once the cause is fixed to resume."""


class RunLockedError(UserError):
    """Another process is writing the same run directory."""


class RunError(AgentRagError):
    """A failure while running a stage."""

    is_retryable: bool = False

    def __init__(self, message: str, *, is_retryable: bool | None = None) -> None:
        super().__init__(message)
        if is_retryable is not None:
            self.is_retryable = is_retryable


class LLMError(RunError):
    """The LLM backend failed (after its retry budget, or with a non-retryable status)."""


class ContextLimitError(LLMError):
    """The request does not fit the model's context window: model-limited data, not an outage
    (never retried; the item becomes a flagged record with this reason)."""

    is_retryable = False


class RetrievalError(RunError):
    """The retriever or retrieval server failed."""


class ParseError(RunError):
    """Model output could not be parsed into the expected structure."""


FailureKind = Literal["outage", "fatal", "model_limited", "bug"]

#: OSError numbers that mean "the output cannot be written here" (a StorageError, fatal)
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG})

#: exit codes of every command (docs/concepts.md)
EXIT_OK = 0
EXIT_BUG = 1
EXIT_BAD_INPUT = 2
EXIT_UNFINISHED = 3
EXIT_INTERRUPTED = 130


def _is_transport_error(exc: BaseException) -> bool:
    """A network-level failure of any client library (httpx, requests, urllib3, openai)."""
    for cls in type(exc).__mro__:
        mod, name = cls.__module__.split(".")[0], cls.__name__
        if (mod, name) in {("httpx", "TransportError"), ("requests", "ConnectionError"),
                           ("requests", "Timeout"), ("urllib3", "HTTPError"),
                           ("openai", "APIConnectionError"), ("openai", "APITimeoutError")}:
            return True
    return False


def classify(exc: BaseException) -> FailureKind:
    """What the failure policy does with an item whose work raised ``exc`` (module docstring)."""
    if isinstance(exc, UserError):
        return "fatal"
    if isinstance(exc, ContextLimitError):
        return "model_limited"
    if isinstance(exc, RunError):
        if exc.is_retryable:
            return "outage"
        if isinstance(exc, (LLMError, RetrievalError)):
            return "fatal"  # a non-retryable status that is not an endpoint error: no retry helps
        return "bug"
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS and getattr(exc, "filename", None):
        return "fatal"
    if isinstance(exc, (ConnectionError, TimeoutError)) or _is_transport_error(exc):
        return "outage"
    return "bug"


def storage_error(exc: OSError, path: object) -> StorageError:
    """A one-line :class:`StorageError` for an OSError raised while writing ``path``."""
    why = exc.strerror or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        fix = "free some space, then rerun the same command to resume"
    elif exc.errno == errno.EROFS:
        fix = "the file system is read-only: pass an --out on a writable one"
    else:
        fix = "check the permissions or pass another --out"
    return StorageError(f"cannot write {str(path)!r}: {why}; {fix}")


__all__ = ["AgentRagError", "UserError", "EndpointError", "StorageError", "RunLockedError", "RunError",
           "LLMError", "ContextLimitError", "RetrievalError", "ParseError", "FailureKind", "classify",
           "storage_error", "STORAGE_ERRNOS", "EXIT_OK", "EXIT_BUG", "EXIT_BAD_INPUT", "EXIT_UNFINISHED",
           "EXIT_INTERRUPTED"]
