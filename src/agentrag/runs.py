"""Run directories: a resolved ``config.yaml`` and append-only JSONL stage files.

Each stage file holds records keyed by a stable id. Rerunning a command resumes: ids already in
the file are skipped. A process killed mid-write leaves at most one torn last line; it is detected
on open, dropped with a warning and truncated away, so the file always reads back cleanly.

A stage whose items are all finished can be put in its final form with :meth:`JsonlStore.finish`:
records in input order (items redone after an outage or a crash go back to their place) and the
timings of each record (:data:`VOLATILE_FIELDS`, which differ between two runs of the same work)
moved to a side file ``<stage>.timings.jsonl``, so a resumed run's file equals an uninterrupted
run's byte for byte; reading the store puts the timings back.

One process writes a run directory: :class:`RunDir` takes an advisory lock (``.agentrag.lock``,
``flock``) that a second process gets as a :class:`~agentrag.errors.RunLockedError` naming the
first. A write that fails because the disk is full or the file system is read-only raises a
one-line :class:`~agentrag.errors.StorageError` (the torn line is cut back, the run resumes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml
from pydantic import BaseModel

from agentrag.config import dump_config
from agentrag.errors import RunLockedError, UserError, storage_error, writing
from agentrag.paths import check_out_dir
from agentrag.records import _load_object, dump_record, parse_record

log = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)


_ID_FIRST = re.compile(r'\{"id":"((?:[^"\\]|\\.)+)"[,}]')


def _default_key(record: BaseModel) -> str:
    key = getattr(record, "id", None)
    if not isinstance(key, str) or not key:
        raise UserError(f"{type(record).__name__} has no string 'id' to key it by in a run file")
    return key


#: record fields that measure time (a trajectory's ``elapsed``, a step's ``latency``); kept out of a
#: finished stage file (in ``<stage>.timings.jsonl``), since they differ between two runs of the same work
VOLATILE_FIELDS = frozenset({"elapsed", "latency"})


def split_volatile(obj: Any) -> Any:
    """Remove the :data:`VOLATILE_FIELDS` from the JSON value ``obj`` in place (at any depth);
    returns what was removed in the same nesting (lists as ``{"index": removed}``), or None."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k in [k for k in obj if k in VOLATILE_FIELDS and isinstance(obj[k], (int, float))]:
            out[k] = obj.pop(k)
        for k, v in obj.items():
            sub = split_volatile(v)
            if sub is not None:
                out[k] = sub
        return out or None
    if isinstance(obj, list):
        items = {str(i): sub for i, v in enumerate(obj) if (sub := split_volatile(v)) is not None}
        return items or None
    return None


def merge_volatile(obj: Any, removed: Any) -> None:
    """Put back into ``obj`` what :func:`split_volatile` removed from it (in place)."""
    if isinstance(obj, dict) and isinstance(removed, dict):
        for k, v in removed.items():
            if k in VOLATILE_FIELDS and not isinstance(v, dict):
                obj[k] = v
            elif k in obj:
                merge_volatile(obj[k], v)
    elif isinstance(obj, list) and isinstance(removed, dict):
        for i, v in removed.items():
            if i.isdigit() and int(i) < len(obj):
                merge_volatile(obj[int(i)], v)


class JsonlStore(Generic[R]):
    """An append-only JSONL file of records with resume by record id.

    Appends are serialized by a lock and each line goes to the OS in one ``write``, so a killed
    process loses nothing already appended and can tear at most the last line. ``fsync`` (which
    only matters if the machine itself goes down) runs at most every ``fsync_interval`` seconds:
    per line it cost ~10 ms on a busy disk, in the driver thread that writes every result. A
    line lost to a power cut is an unfinished item, redone on the next run.
    """

    fsync_interval = 1.0

    def __init__(self, path: str | os.PathLike[str], model: type[R], key: Callable[[R], str] | None = None):
        self.path = Path(path)
        self.model = model
        self.key: Callable[[R], str] = key or _default_key
        self._lock = threading.Lock()
        self._ids: set[str] = set()
        self._synced = 0.0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._repair_and_index()
        except OSError as exc:
            raise storage_error(exc, self.path) from exc

    def _repair_and_index(self) -> None:
        if not self.path.exists():
            self.path.touch()
            return
        data = self.path.read_bytes()
        good_end = 0
        pos = 0
        lineno = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            lineno += 1
            if nl == -1:  # a last line without newline: torn write
                log.warning("%s:%d: dropping a torn last line (%d bytes) left by an interrupted write",
                            self.path, lineno, len(data) - pos)
                break
            line = data[pos:nl].decode("utf-8", errors="replace")
            if line.strip():
                try:
                    k = self._line_key(line, lineno)
                except UserError:
                    if data.find(b"\n", nl + 1) == -1 and not data[nl + 1:].strip():
                        log.warning("%s:%d: dropping an unreadable last line left by an interrupted write",
                                    self.path, lineno)
                        break
                    raise
                if k in self._ids:
                    log.warning("%s:%d: duplicate id %r ignored", self.path, lineno, k)
                self._ids.add(k)
            good_end = nl + 1
            pos = nl + 1
        if good_end < len(data):
            with self.path.open("r+b") as fh:
                fh.truncate(good_end)

    def _line_key(self, line: str, lineno: int) -> str:
        """The id of one line. With the default key only the JSON is parsed (the record is
        validated when read): a resume opens every stage file, and validating each record there
        cost about as much as parsing it."""
        if self.key is _default_key:
            m = _ID_FIRST.match(line)  # dump_record's compact line of a model whose first field is id
            if m and line.rstrip().endswith("}"):
                return json.loads(f'"{m.group(1)}"') if "\\" in m.group(1) else m.group(1)
            obj = _load_object(line, self.path, lineno)
            key = obj.get("id")
            if isinstance(key, str) and key:
                return key
        return self.key(parse_record(self.model, line, path=self.path, lineno=lineno))

    def __contains__(self, key: object) -> bool:
        return key in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._ids)

    def append(self, record: R) -> bool:
        """Append ``record`` unless its id is already present; returns whether it was written."""
        k = self.key(record)
        line = (dump_record(record) + "\n").encode("utf-8")
        with self._lock:
            if k in self._ids:
                return False
            try:
                with self.path.open("ab") as fh:
                    start = fh.tell()
                    try:
                        fh.write(line)
                        fh.flush()
                        now = time.monotonic()
                        if now - self._synced >= self.fsync_interval:
                            os.fsync(fh.fileno())
                            self._synced = now
                    except OSError:
                        _cut_back(fh, start)
                        raise
            except OSError as exc:
                raise storage_error(exc, self.path) from exc
            self._ids.add(k)
        return True

    @property
    def timings_path(self) -> Path:
        """The side file of a finished stage's timings (:meth:`finish`)."""
        return timings_path(self.path)

    def _timings(self) -> dict[str, Any]:
        return _read_timings(self.path)

    def __iter__(self) -> Iterator[R]:
        seen: set[str] = set()
        for rec in read_records(self.path, self.model):
            k = self.key(rec)
            if k not in seen:
                seen.add(k)
                yield rec

    def finish(self, order: Iterable[str]) -> bool:
        """Put the file in its final form (module docstring): the records of the ids in ``order``
        first, in that order, then any others in file order, each without its timings, which go
        to :attr:`timings_path`. Both files are replaced atomically and only when they change;
        returns whether the stage file changed. Memory holds one offset per record and the
        timings, never the records (a second pass reads each line where the first found it)."""
        with self._lock:
            where: dict[str, tuple[int, int]] = {}
            with self.path.open("rb") as fh:
                offset = 0
                for lineno, raw in enumerate(fh, start=1):
                    if raw.endswith(b"\n") and raw.strip():
                        where.setdefault(self._line_key(raw.decode("utf-8"), lineno), (offset, len(raw)))
                    offset += len(raw)
            ordered = [k for k in dict.fromkeys(order) if k in where]
            first = set(ordered)
            ordered += [k for k in where if k not in first]
            timings = self._timings()
            tmp = self.path.with_name(self.path.name + ".tmp")
            with writing(self.path, tmp), self.path.open("rb") as src, tmp.open("w", encoding="utf-8") as out:
                for k in ordered:
                    start, size = where[k]
                    src.seek(start)
                    obj = json.loads(src.read(size))
                    removed = split_volatile(obj)
                    if removed is not None:
                        timings[k] = removed
                    out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
            kept = [k for k in ordered if k in timings]
            if kept or self.timings_path.exists():  # before the stage file: a crash loses no timing
                _atomic_write(self.timings_path, "".join(
                    json.dumps({"id": k, "timings": timings[k]}, ensure_ascii=False, separators=(",", ":")) + "\n"
                    for k in kept))
            with writing(self.path, tmp):
                return replace_if_changed(tmp, self.path)

    def state(self) -> list[int] | None:
        """``[size, mtime_ns]`` of the file (None when there is none): an append always changes it."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return [st.st_size, st.st_mtime_ns]

    def read(self) -> list[R]:
        return list(self)


_DIGITS = re.compile(r"(\d+)")


def _natural(key: str) -> list[Any]:
    """A sort key that orders the numbers inside ids by value (``i2`` before ``i10``)."""
    return [int(part) if i % 2 else part for i, part in enumerate(_DIGITS.split(key))]


def _root_of(key: str, pos: Mapping[str, int]) -> str | None:
    """The longest id of ``pos`` that ``key`` is or starts with, followed by a character that is
    not a letter or digit (``q1`` is the root of ``q1:0`` and ``q1-n3-qa``, not of ``q10``)."""
    if key in pos:
        return key
    for i in range(len(key) - 1, 0, -1):
        if not key[i].isalnum() and key[:i] in pos:
            return key[:i]
    return None


def input_order(ids: Iterable[str], pos: Mapping[str, int]) -> list[str]:
    """The record ids ``ids`` in input order: by the position in ``pos`` of their item (the
    longest input id each starts with, see :func:`_root_of`), then, within one item, the item's
    own record first and the others by id, numbers by value (``i2`` before ``i10``); ids of no
    input item last, by id. An order that depends only on the ids, so a resumed run's stage files
    equal an uninterrupted run's at any concurrency."""
    def sort_key(key: str) -> tuple[int, int, list[Any]]:
        root = _root_of(key, pos)
        if root is None:
            return (len(pos), 1, _natural(key))
        return (pos[root], 0 if key == root else 1, _natural(key))

    return sorted(ids, key=sort_key)


def timings_path(path: str | os.PathLike[str]) -> Path:
    """The timings side file of the stage file ``path`` (``x.jsonl`` -> ``x.timings.jsonl``)."""
    p = Path(path)
    return p.with_name(p.name.removesuffix(".jsonl") + ".timings.jsonl")


def _read_timings(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        text = timings_path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if line.strip():
            obj = json.loads(line)
            out[str(obj["id"])] = obj["timings"]
    return out


def read_records(path: str | os.PathLike[str], model: type[R]) -> Iterator[R]:
    """The records of the stage file ``path`` in file order, with the timings of a finished stage
    put back (:meth:`JsonlStore.finish`); a torn last line is skipped; nothing is written (a
    reader, e.g. the viewer, beside a running writer)."""
    p = Path(path)
    timings = _read_timings(p)
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n") or not raw.strip():
                continue
            yield parse_timed(model, raw.decode("utf-8"), timings, p, lineno)


def read_timings(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The timings of the finished stage file ``path`` by record id (empty when it has none)."""
    return _read_timings(path)


def parse_timed(model: type[R], line: str, timings: Mapping[str, Any], path: str | os.PathLike[str],
                lineno: int) -> R:
    """One line of a stage file as a record, with its timings (``timings``: :func:`read_timings`) put back."""
    if timings:
        obj = _load_object(line, path, lineno)
        if obj.get("id") in timings:
            merge_volatile(obj, timings[obj["id"]])
            line = json.dumps(obj, ensure_ascii=False)
    return parse_record(model, line, path=path, lineno=lineno)


def _cut_back(fh: Any, size: int) -> None:
    """Truncate a file whose append failed back to ``size`` (best effort: the disk may be full)."""
    try:
        fh.truncate(size)
    except OSError:
        log.warning("could not cut a torn line back in %s; it is dropped on the next open", fh.name)


LOCK_NAME = ".agentrag.lock"
_HELD: dict[str, list[Any]] = {}  # realpath of a run directory -> [open lock file, holders]
_HELD_LOCK = threading.Lock()


def _acquire(path: Path) -> str:
    """Take this process's writer lock on the run directory ``path`` (re-entrant per process)."""
    import fcntl
    import sys

    key = os.path.realpath(path)
    with _HELD_LOCK:
        if key in _HELD:
            _HELD[key][1] += 1
            return key
        lock_path = path / LOCK_NAME
        try:
            fh = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release
        except OSError as exc:
            raise storage_error(exc, lock_path) from exc
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            fh.close()
            raise RunLockedError(f"run directory {str(path)!r} is being written by {holder}; wait for it to "
                                 "finish (or stop it), or pass another run directory (the CLI's --out)") from exc
        fh.seek(0)
        fh.truncate()
        fh.write(f"process {os.getpid()} ({' '.join(sys.argv[:3])[:120]})\n")
        fh.flush()
        _HELD[key] = [fh, 1]
        return key


def _release(key: str) -> None:
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] <= 0:
            held[0].close()  # closing the file drops the flock
            del _HELD[key]


class RunDir:
    """A run directory: ``config.yaml``, stage JSONL files, metrics and reports.

    Opening one takes the writer lock (see the module docstring); :meth:`close` (or the end of a
    ``with`` block, or the process) gives it back. ``lock=False`` opens it for reading only."""

    def __init__(self, path: str | os.PathLike[str], *, lock: bool = True):
        self.path = Path(path)
        check_out_dir(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise storage_error(exc, self.path) from exc
        self._lock_key = _acquire(self.path) if lock else None
        self._stores: dict[str, JsonlStore[Any]] = {}

    def close(self) -> None:
        """Give the writer lock back (idempotent)."""
        if self._lock_key is not None:
            _release(self._lock_key)
            self._lock_key = None

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def file(self, name: str) -> Path:
        return self.path / name

    def write_config(self, config: BaseModel, *, check_resume: bool = True) -> None:
        """Write the resolved config; when resuming, warn if it differs from the stored one."""
        text = dump_config(config)
        target = self.path / "config.yaml"
        if check_resume and target.exists():
            old = target.read_text(encoding="utf-8")
            if yaml.safe_load(old) != yaml.safe_load(text):
                log.warning("%s differs from the config of this run; the run resumes with the new one "
                            "(the old one is kept as config.prev.yaml)", target)
                (self.path / "config.prev.yaml").write_text(old, encoding="utf-8")
        _atomic_write(target, text)

    def stage_file(self, name: str, model: type[R], key: Callable[[R], str] | None = None) -> JsonlStore[R]:
        """The append-only JSONL file ``<name>.jsonl`` of this run (remembered for :meth:`finish_stages`)."""
        store = JsonlStore(self.path / f"{name}.jsonl", model, key)
        self._stores[name] = store
        return store

    def finish_stages(self, roots: Iterable[str]) -> list[str]:
        """Put every stage file this run opened (:meth:`stage_file`) that changed since its last
        finish in its final form (:meth:`JsonlStore.finish`), in :func:`input_order` of ``roots``
        (the ids of the run's input items, in input order); returns the names of the files rewritten."""
        try:
            done = json.loads((self.path / FINISHED_STAGES).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            done = {}
        stale = {name: store for name, store in self._stores.items()
                 if store.state() != done.get(name) and (len(store) or name in done)}
        if not stale:
            return []
        pos = {r: i for i, r in enumerate(dict.fromkeys(roots))}
        changed = [name for name, store in stale.items() if store.finish(input_order(store.ids, pos))]
        self.write_json(FINISHED_STAGES, {**done, **{name: store.state() for name, store in stale.items()}})
        return changed

    def write_json(self, name: str, obj: Any) -> Path:
        target = self.path / name
        _atomic_write(target, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")
        return target

    def derived(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` (a JSON-able value derived from the run's files: statistics, an export
        summary), or the value stored by the last call when no data file of the run changed since
        (see :func:`fingerprint`; ``key`` names whatever else it depends on, e.g. the config and
        the item ids asked for). A no-op rerun then reads no record for its report and exports."""
        found, value = self.stored(".derived.json", key)
        if found:
            return value
        value = json.loads(json.dumps(compute(), default=str))  # as a reuse returns it
        # taken after compute(): the exports it writes are part of the state a rerun compares with
        self.store(".derived.json", key, value)
        return value

    def stored(self, name: str, key: str) -> tuple[bool, Any]:
        """``(True, value)`` when the state file ``name`` (one of :data:`STATE_FILES`) holds a value
        stored by :meth:`store` with this ``key`` and no data file of the run changed since
        (:func:`fingerprint`: names, sizes, mtimes; nothing is read); ``(False, None)`` otherwise."""
        try:
            old = json.loads((self.path / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False, None
        if isinstance(old, dict) and "value" in old and old.get("fingerprint") == fingerprint(self.path, _key(key)):
            return True, old["value"]
        return False, None

    def store(self, name: str, key: str, value: Any) -> None:
        """Store the JSON-able ``value`` in the state file ``name`` with the fingerprint of the
        run's data files now and ``key`` (read back by :meth:`stored`)."""
        if name not in STATE_FILES:
            raise ValueError(f"{name!r} is not a state file of a run ({', '.join(STATE_FILES)})")
        self.write_json(name, {"fingerprint": fingerprint(self.path, _key(key)), "value": value})

    def write_text(self, name: str, text: str) -> Path:
        target = self.path / name
        _atomic_write(target, text)
        return target


#: state files of a run directory (:meth:`RunDir.store`): values stored with the fingerprint of
#: the data files, ``.derived.json`` (statistics and exports), ``.finished.json`` (the output of
#: a run that finished every item: :func:`agentrag.synth.driver.run_or_reuse` and
#: ``agentrag.eval.run``'s no-op rerun)
STATE_FILES = (".derived.json", ".finished.json")
#: the state file of a run that finished every item (its stored output, keyed by what it depends on)
FINISHED = ".finished.json"
#: the size and mtime of each stage file when :meth:`RunDir.finish_stages` last finished it: a
#: stage file that still has them is in its final form (nothing to read on a resume)
FINISHED_STAGES = ".stages.json"


def records_key(records: Iterable[BaseModel]) -> str:
    """A short key of input records' contents (in order), for a stored output: an edited record,
    an added or removed one changes it."""
    import hashlib

    h = hashlib.sha1()
    for r in records:
        h.update(r.model_dump_json().encode("utf-8") + b"\n")
    return h.hexdigest()


def config_key(cfg: Any, *parts: str) -> str:
    """A key of a config (its JSON) and ``parts`` (e.g. a :func:`records_key`), for a stored output."""
    dump = cfg.model_dump_json() if hasattr(cfg, "model_dump_json") else repr(cfg)
    return "\n".join([dump, *parts])

#: files of a run directory that describe an invocation, not the run's data (left out of its fingerprint)
_NOT_DATA = ("metrics.json", "report.md", "report.html", "unfinished.json", ".agentrag.lock",
             *STATE_FILES, FINISHED_STAGES, "config.prev.yaml")


def _key(key: str) -> str:
    from agentrag._version import __version__

    return f"{__version__}\n{key}"  # another release may compute it differently


def fingerprint(path: str | os.PathLike[str], extra: str = "") -> str:
    """A hash of the run directory's data files (name, size, mtime; not their contents, so it
    reads nothing) and ``extra``: unchanged when a rerun added, removed or rewrote nothing."""
    import hashlib

    root = Path(path)
    h = hashlib.sha1(extra.encode("utf-8"))
    for p in sorted(root.rglob("*")):
        name = p.name
        if name in _NOT_DATA or name.endswith(".tmp") or name.startswith("llm_cache.sqlite") or not p.is_file():
            continue
        st = p.stat()
        h.update(f"{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def same_bytes(a: str | os.PathLike[str], b: str | os.PathLike[str], chunk: int = 1 << 20) -> bool:
    """Whether two files hold the same bytes (read in chunks: memory bounded by ``chunk``)."""
    a, b = Path(a), Path(b)
    try:
        if a.stat().st_size != b.stat().st_size:
            return False
        with a.open("rb") as fa, b.open("rb") as fb:
            while True:
                x, y = fa.read(chunk), fb.read(chunk)
                if x != y:
                    return False
                if not x:
                    return True
    except FileNotFoundError:
        return False


def replace_if_changed(tmp: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Move the freshly written ``tmp`` over ``path`` unless ``path`` already holds the same bytes
    (then ``tmp`` is removed and ``path`` keeps its mtime); returns whether ``path`` was replaced.

    Every derived file of a run (exports, ``config.yaml``, benchmark files) is written this way, so
    a no-op rerun rewrites nothing that did not change."""
    if same_bytes(tmp, path):
        Path(tmp).unlink()
        return False
    os.replace(tmp, path)
    return True


def _atomic_write(path: Path, text: str) -> bool:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        return replace_if_changed(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise storage_error(exc, path) from exc


__all__ = ["JsonlStore", "RunDir", "LOCK_NAME", "VOLATILE_FIELDS", "read_records"]
