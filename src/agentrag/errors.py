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

import contextlib
import errno
import os
from collections.abc import Iterator
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

    #: seconds the endpoint asked to wait before the next attempt (a 429/503's Retry-After, capped)
    retry_after: float | None = None


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
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG,
                            errno.EIO})
#: the subset that is the disk's own failure (full, over quota, file too large, I/O error, read-only):
#: fatal wherever it is raised, with or without a file name (a failed ``write`` names none)
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})
#: SQLite's primary result codes that are the disk's failure, with the errno they mean
#: (SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY, SQLITE_CANTOPEN)
SQLITE_DISK_CODES = {13: errno.ENOSPC, 10: errno.EIO, 8: errno.EROFS, 14: errno.EACCES}

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
    if is_disk_error(exc):
        return "fatal"
    if isinstance(exc, (ConnectionError, TimeoutError)) or _is_transport_error(exc):
        return "outage"
    return "bug"


def _sqlite_errno(exc: BaseException) -> int | None:
    """The errno a SQLite error stands for when it is the disk's failure (:data:`SQLITE_DISK_CODES`)."""
    if type(exc).__module__ != "sqlite3":
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):  # no code (an old Python): the message SQLite gives those
        text = str(exc).lower()
        return errno.ENOSPC if "disk is full" in text else errno.EIO if "disk i/o error" in text else None
    return SQLITE_DISK_CODES.get(code & 0xFF)


def is_disk_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the disk failing a write: an OSError in :data:`DISK_ERRNOS` or SQLite's
    "database or disk is full" / "disk I/O error" / read-only / cannot-open (never a bug)."""
    if isinstance(exc, StorageError):
        return True
    if isinstance(exc, OSError):
        return exc.errno in DISK_ERRNOS
    return _sqlite_errno(exc) is not None


def storage_error(exc: BaseException, path: object = None) -> StorageError:
    """A one-line :class:`StorageError` for an OSError (or a SQLite disk error) raised while
    writing ``path`` (default: the file the OSError names)."""
    if isinstance(exc, StorageError):
        return exc
    code = exc.errno if isinstance(exc, OSError) else _sqlite_errno(exc)
    if path is None:
        path = getattr(exc, "filename", None) or "a file of the run"
    why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        fix = "the disk is full: free some space, then rerun the same command to resume"
    elif code == errno.EIO:
        fix = ("the disk failed a read or write (full, failing or unmounted): check it (df, dmesg), then rerun "
               "the same command to resume")
        return StorageError(f"disk I/O error on {str(path)!r}: {why}; {fix}")
    elif code == errno.EROFS:
        fix = "the file system is read-only: pass an --out on a writable one"
    else:
        fix = "check the permissions or pass another --out"
    return StorageError(f"cannot write {str(path)!r}: {why}; {fix}")


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], *cleanup: str | os.PathLike[str]) -> Iterator[None]:
    """Around the writing of ``path``: an OSError in :data:`STORAGE_ERRNOS` (a full disk, an I/O
    error, a read-only file system, no permission) becomes a one-line :class:`StorageError`
    naming ``path``; the ``cleanup`` files (a half-written temp file) are removed first."""
    try:
        yield
    except OSError as exc:
        for extra in cleanup:
            with contextlib.suppress(OSError):
                os.unlink(extra)
        if exc.errno in STORAGE_ERRNOS:
            raise storage_error(exc, path) from None
        raise


__all__ = ["AgentRagError", "UserError", "EndpointError", "StorageError", "RunLockedError", "RunError",
           "LLMError", "ContextLimitError", "RetrievalError", "ParseError", "FailureKind", "classify",
           "storage_error", "writing", "is_disk_error", "STORAGE_ERRNOS", "DISK_ERRNOS", "EXIT_OK", "EXIT_BUG", "EXIT_BAD_INPUT", "EXIT_UNFINISHED",
           "EXIT_INTERRUPTED"]
