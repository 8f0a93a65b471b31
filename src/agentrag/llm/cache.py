"""Response cache: sqlite (WAL), keyed by backend, model, the full request and the sample index.

An identical rerun makes zero backend calls. Safe under threads and several processes (WAL
journal, busy timeout, ``INSERT OR IGNORE`` so the first writer wins). Many threads (a run's items in
flight) share one cache without queueing behind each other: a lookup reads through a connection of
its own (a small pool; WAL readers never wait for the writer), and a write adds its rows to the
pending set and commits every pending row at once when it gets the write connection (a group
commit: a thread that finds its rows already committed by another returns at once). A write
returns only after its rows are committed (``synchronous=NORMAL`` in WAL mode: a killed process
loses nothing committed; only a power cut may lose the last commits, which a rerun asks again).

A full or failing disk (SQLite's "database or disk is full" / "disk I/O error") is a disk error,
never a corrupt cache: a reply that cannot be written is kept in memory (served to a repeat of
the same request) and written at the next write or :func:`flush_unsaved`; while one is held, a
request that would reach the backend raises a one-line :class:`~agentrag.errors.StorageError`
instead (the run stops before paying for more). The cache is called corrupt, and moving it aside
advised, only when SQLite's integrity check says so.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from agentrag.errors import StorageError, UserError, is_disk_error, storage_error
from agentrag.llm.base import LLM, Completion
from agentrag.records import Message


def request_key(backend: str, model: str, messages: list[Message], tools: list[dict[str, Any]] | None,
                response_format: dict[str, Any] | None, sampling: dict[str, Any]) -> str:
    """A stable hash of everything that determines a response (except the sample index)."""
    payload = {"backend": backend, "model": model, "messages": [m.to_openai() for m in messages],
               "tools": tools, "response_format": response_format,
               "sampling": {k: v for k, v in sorted(sampling.items()) if v is not None}}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


log = logging.getLogger(__name__)

#: SQLite primary result codes of a file that is not a (sound) database: SQLITE_CORRUPT, SQLITE_NOTADB
_CORRUPT_CODES = frozenset({11, 26})
#: caches holding replies their disk could not take yet (written by :func:`flush_unsaved`)
_UNSAVED: weakref.WeakSet[ResponseCache] = weakref.WeakSet()


def integrity_problem(path: str | Path) -> str | None:
    """What SQLite's integrity check finds wrong with the database ``path`` (opened read-only),
    or None when it passes or the file cannot be read at all (then nothing is proven)."""
    try:
        db = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        rows = db.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        return str(exc) if code in _CORRUPT_CODES else None
    finally:
        db.close()
    found = [str(r[0]) for r in rows if str(r[0]).lower() != "ok"]
    return "; ".join(found[:3]) if found else None


def _open_error(path: Path, exc: sqlite3.Error) -> UserError:
    """The one-line error for a cache file SQLite would not open: a disk error, a proven corrupt
    file (only then is moving it aside advised), or neither (the file is kept, nothing advised)."""
    if is_disk_error(exc):
        return storage_error(exc, path)
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _CORRUPT_CODES:
        problem = integrity_problem(path)
        if problem is not None:
            return UserError(f"LLM cache {str(path)!r} is corrupt (SQLite's integrity check: {problem}); move it "
                             "aside (its cached replies are then asked again) or pass another --out")
    return UserError(f"LLM cache {str(path)!r} could not be opened ({exc}); its cached replies are kept: check "
                     "the disk and the file's permissions, then rerun")


def flush_unsaved() -> int:
    """Write the replies every cache of this process holds in memory because its disk failed;
    returns how many are still unsaved (logged as an error: they are asked again on a rerun)."""
    left = 0
    for cache in list(_UNSAVED):
        left += cache.flush()
    if left:
        log.error("%d paid LLM replies could not be written to the LLM cache (the disk is still failing); a "
                  "rerun asks for them again", left)
    return left


atexit.register(flush_unsaved)


def _shift_seed(sampling: dict[str, Any], offset: int) -> dict[str, Any]:
    """Sampling for samples ``offset..``: backends seed sample ``i`` with ``seed + i``."""
    if offset and sampling.get("seed") is not None:
        return {**sampling, "seed": int(sampling["seed"]) + offset}
    return sampling


def _with_retry(fn: Any, budget_s: float = 60.0) -> Any:
    """``fn()``, retried while SQLite says the file is locked by another process (``budget_s`` in all)."""
    deadline = time.monotonic() + budget_s
    delay = 0.01
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            locked = "locked" in str(exc) or "busy" in str(exc)
            if not locked or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class ResponseCache:
    """A sqlite table ``(key, idx) -> completion JSON``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        #: the write connection (and the flush that uses it); held while a group of rows is committed
        self._lock = threading.Lock()
        #: guards ``_pending`` and ``_readers``; held for dictionary/list operations only, never for I/O
        self._plock = threading.Lock()
        #: (key, idx) -> row not committed yet (waiting for the write connection, or refused by the
        #: disk); ``failure`` is the error the disk gave
        self._pending: dict[tuple[str, int], tuple[str, int, str, str]] = {}
        #: idle read connections (a lookup takes one, or opens one, and gives it back)
        self._readers: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self.failure: StorageError | None = None
        try:
            self._db = self._connect()
            _with_retry(self._init_schema)
            self._db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise _open_error(self.path, exc) from None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
        db.execute("PRAGMA busy_timeout=60000")
        return db

    def _init_schema(self) -> None:
        # Switching to WAL takes an exclusive lock and SQLite answers SQLITE_BUSY at once (no busy
        # handler) when another process opens the same new file at the same moment (Ray workers
        # starting together): the journal mode persists in the file, so only switch when needed.
        if str(self._db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT NOT NULL, idx INTEGER NOT NULL, "
                         "model TEXT, value TEXT NOT NULL, PRIMARY KEY (key, idx))")
        self._db.commit()

    def _select(self, key: str, n: int) -> list[tuple[int, str]]:
        with self._plock:
            db = self._readers.pop() if self._readers else None
        try:
            if db is None:
                db = self._connect()
                with self._plock:
                    self._all_readers.append(db)
            rows: list[tuple[int, str]] = db.execute(
                "SELECT idx, value FROM responses WHERE key = ? AND idx < ?", (key, n)).fetchall()
        except sqlite3.Error as exc:
            if is_disk_error(exc):
                raise storage_error(exc, self.path) from None
            raise
        finally:
            if db is not None:
                with self._plock:
                    self._readers.append(db)
        return rows

    def get(self, key: str, n: int) -> dict[int, Completion]:
        # the rows not committed yet are read first: a row leaves them only once committed, so
        # it is in one of the two places
        held: list[tuple[int, str]] = []
        if self._pending:
            with self._plock:
                held = [(i, row[3]) for (k, i), row in self._pending.items() if k == key and i < n]
        rows = self._select(key, n) + held
        return {int(i): Completion.model_validate_json(v) for i, v in rows}

    def put(self, key: str, model: str, completions: dict[int, Completion]) -> None:
        """Store ``completions`` (sample index -> completion); returns once they are committed
        (by this thread or by another's group commit). When the disk fails they are held in
        memory (module docstring) and this returns normally: the reply is paid for, so the caller
        gets it."""
        rows = {(key, i): (key, i, model, c.model_dump_json()) for i, c in completions.items()}
        with self._plock:
            for k, row in rows.items():
                self._pending.setdefault(k, row)
        with self._lock:
            with self._plock:
                mine = any(k in self._pending for k in rows)
            if mine:
                self._flush_locked()

    def flush(self) -> int:
        """Write the replies held in memory; returns how many the disk still did not take."""
        with self._lock:
            self._flush_locked()
            return len(self._pending)

    def writable(self) -> None:
        """Raise the held :class:`StorageError` when replies are waiting for the disk and it still
        fails: the caller must not pay for a new reply that could not be kept either."""
        if not self._pending:
            return
        with self._lock:
            if self._pending and not self._flush_locked() and self.failure is not None:
                raise StorageError(f"{self.failure} ({len(self._pending)} paid LLM replies are held in memory "
                                   "until then; no new request is sent)")

    def _flush_locked(self) -> bool:
        with self._plock:
            batch = dict(self._pending)
        if not batch:
            return True
        try:
            self._db.executemany("INSERT OR IGNORE INTO responses (key, idx, model, value) VALUES (?, ?, ?, ?)",
                                 list(batch.values()))
            self._db.commit()
        except sqlite3.Error as exc:
            if not is_disk_error(exc):
                raise
            try:
                self._db.rollback()
            except sqlite3.Error:
                log.debug("rollback after a failed cache write failed too", exc_info=True)
            if self.failure is None:
                log.warning("LLM cache %s: %s; replies are held in memory until the disk takes them", self.path, exc)
            self.failure = storage_error(exc, self.path)
            _UNSAVED.add(self)
            return False
        if self.failure is not None:
            log.info("LLM cache %s: %d held replies written", self.path, len(batch))
        with self._plock:
            for k in batch:
                self._pending.pop(k, None)
        self.failure = None
        _UNSAVED.discard(self)
        return True

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._flush_locked()
            self._db.close()
            with self._plock:
                readers, self._readers, self._all_readers = self._all_readers, [], []
            for db in readers:
                db.close()


class CachedLLM:
    """Wraps any LLM; completions are served from ``path`` when the same request was seen.

    Sample ``i`` of a request is stored under index ``i``, so asking for ``n=4`` after ``n=2``
    reuses the first two and asks the backend for two more (seeded ``seed + 2`` when seeded). ``hits``/``misses`` count completions; ``inner_calls`` counts calls
    that reached the wrapped backend.
    """

    def __init__(self, inner: LLM, path: str | Path) -> None:
        self.inner = inner
        self.model = inner.model
        self.backend = str(getattr(inner, "backend", type(inner).__name__))
        self.cache = ResponseCache(path)
        self.hits = 0
        self.misses = 0
        self.inner_calls = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CachedLLM({self.inner!r}, path={str(self.cache.path)!r})"

    @property
    def meter(self) -> Any:
        """The wrapped backend's token/latency meter (cache hits cost nothing, so are not in it)."""
        return getattr(self.inner, "meter", None)

    def stats(self) -> dict[str, Any]:
        """Cache hits/misses, calls that reached the backend, and the backend's token totals."""
        with self._lock:
            total = self.hits + self.misses
            out: dict[str, Any] = {"hits": self.hits, "misses": self.misses, "inner_calls": self.inner_calls,
                                   "hit_rate": round(self.hits / total, 4) if total else 0.0}
        meter = self.meter
        if meter is not None and hasattr(meter, "snapshot"):
            snap = meter.snapshot()
            out.update(prompt_tokens=snap["prompt_tokens"], completion_tokens=snap["completion_tokens"],
                       backend_latency_s=snap["latency_s"])
        return out

    def _key(self, messages: list[Message], tools: list[dict[str, Any]] | None,
             response_format: dict[str, Any] | None, sampling: dict[str, Any]) -> str:
        return request_key(self.backend, self.model, messages, tools, response_format, sampling)

    def _finish(self, key: str, have: dict[int, Completion], fresh: list[Completion], n: int) -> list[Completion]:
        missing = [i for i in range(n) if i not in have]
        new = dict(zip(missing, fresh, strict=False))
        self.cache.put(key, self.model, new)
        stored = self.cache.get(key, n)  # another process may have written first: its answer wins
        with self._lock:
            self.hits += len(have)
            self.misses += len(new)
            self.inner_calls += 1
        return [stored.get(i) or new[i] for i in range(n)]

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
             response_format: dict[str, Any] | None = None, n: int = 1, **sampling: Any) -> list[Completion]:
        key = self._key(messages, tools, response_format, sampling)
        have = self.cache.get(key, n)
        if len(have) == n:
            with self._lock:
                self.hits += n
            return [have[i] for i in range(n)]
        self.cache.writable()
        fresh = self.inner.chat(messages, tools=tools, response_format=response_format, n=n - len(have),
                                **_shift_seed(sampling, len(have)))
        return self._finish(key, have, fresh, n)

    async def achat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None,
                    response_format: dict[str, Any] | None = None, n: int = 1,
                    **sampling: Any) -> list[Completion]:
        key = self._key(messages, tools, response_format, sampling)
        have = self.cache.get(key, n)
        if len(have) == n:
            with self._lock:
                self.hits += n
            return [have[i] for i in range(n)]
        self.cache.writable()
        fresh = await self.inner.achat(messages, tools=tools, response_format=response_format,
                                       n=n - len(have), **_shift_seed(sampling, len(have)))
        return self._finish(key, have, fresh, n)


def worker_cache_path(run_cache: str | Path | None) -> str | None:
    """The cache a worker process opens: the run's, or ``$AGENTRAG_WORKER_CACHE_DIR/<run>-<host>.sqlite``
    (a node-local copy when the run directory is not on a filesystem every node sees)."""
    import os
    import socket

    if run_cache is None:
        return None
    local = os.environ.get("AGENTRAG_WORKER_CACHE_DIR")
    if not local:
        return str(run_cache)
    run = Path(run_cache).parent.name or "run"
    return str(Path(local) / f"{run}-{socket.gethostname()}.sqlite")


def with_response_cache(llm: Any, path: str | Path, made: dict[int, Any] | None = None) -> Any:
    """An LLM object a Python caller passed to a run, behind the run's response cache as the CLI's
    backends are: the library's own backends (``response_cache = True``: embedded, openai, hf) are
    wrapped in a :class:`CachedLLM` on ``path``; a :class:`CachedLLM` (on any file) and objects of
    other classes (fakes, your own) are used as given. ``made`` maps ``id(llm)`` to its wrapper,
    so an object passed for two roles stays one object (one usage block)."""
    if llm is None or isinstance(llm, CachedLLM) or not getattr(llm, "response_cache", False):
        return llm
    config = getattr(llm, "config", None)
    if config is not None and getattr(config, "cache", True) is False:  # its YAML said cache: false
        return llm
    if made is not None and id(llm) in made:
        return made[id(llm)]
    wrapped = CachedLLM(llm, path)
    if made is not None:
        made[id(llm)] = wrapped
    return wrapped


__all__ = ["with_response_cache", "CachedLLM", "ResponseCache", "request_key", "flush_unsaved", "integrity_problem",
           "worker_cache_path"]
