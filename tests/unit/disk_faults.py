"""A simulated full disk for fault tests: writes fail the way a full disk fails them.

``FullDisk(monkeypatch, files=..., cache=...)``: while ``full`` is true, every ``write`` to an
open file whose name matches ``files`` raises ``OSError(ENOSPC)`` (opening succeeds, as on a real
full disk; the error carries no file name, as ``write(2)``'s does not), and, with ``cache``,
every statement that writes the LLM cache (SQLite) raises SQLite's own "database or disk is full"
(SQLITE_FULL), or ``cache_error`` ("io": "disk I/O error", SQLITE_IOERR). ``writes_failed``
counts the failures. Set ``full = False`` to "free some space"."""

from __future__ import annotations

import builtins
import errno
import io
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CODES = {"full": (13, "SQLITE_FULL", "database or disk is full"), "io": (10, "SQLITE_IOERR", "disk I/O error")}


def sqlite_error(kind: str = "full") -> sqlite3.OperationalError:
    code, name, text = CODES[kind]
    exc = sqlite3.OperationalError(text)
    exc.sqlite_errorcode, exc.sqlite_errorname = code, name  # type: ignore[attr-defined]
    return exc


class _FullFile:
    """A file object whose writes fail while the disk is full (everything else is the real file's)."""

    def __init__(self, fh: Any, disk: FullDisk) -> None:
        self._fh, self._disk = fh, disk

    def write(self, data: Any) -> int:
        if self._disk.full:
            self._disk.failed()
            raise OSError(errno.ENOSPC, "No space left on device")
        return int(self._fh.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)

    def __iter__(self) -> Any:
        return iter(self._fh)

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._fh.close()


class FullDisk:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, files: Callable[[str], bool] = lambda name: False,
                 cache: bool = False, cache_error: str = "full", full: bool = True,
                 fail_times: int | None = None) -> None:
        self.full = full
        #: with ``fail_times``, the disk has room again after that many failed writes
        self.fail_times = fail_times
        self.files = files
        self.writes_failed = 0
        real_open = io.open
        disk = self

        def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            fh = real_open(file, mode, *args, **kwargs)
            if any(c in mode for c in "wax+") and isinstance(file, (str, Path)) and files(Path(file).name):
                return _FullFile(fh, disk)
            return fh

        monkeypatch.setattr(io, "open", fake_open)
        monkeypatch.setattr(builtins, "open", fake_open)
        if cache:
            class FullConnection(sqlite3.Connection):
                def _check(self, sql: str) -> None:
                    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
                    writes = head in ("INSERT", "CREATE", "UPDATE", "DELETE") or sql.replace(" ", "").lower().startswith(
                        "pragmajournal_mode=")
                    if disk.full and writes:
                        disk.failed()
                        raise sqlite_error(cache_error)

                def execute(self, sql: str, *args: Any) -> Any:  # type: ignore[override]
                    self._check(sql)
                    return super().execute(sql, *args)

                def executemany(self, sql: str, *args: Any) -> Any:  # type: ignore[override]
                    self._check(sql)
                    return super().executemany(sql, *args)

            real_connect = sqlite3.connect

            def connect(*args: Any, **kwargs: Any) -> Any:
                kwargs.setdefault("factory", FullConnection)
                return real_connect(*args, **kwargs)

            monkeypatch.setattr(sqlite3, "connect", connect)

    def failed(self) -> None:
        self.writes_failed += 1
        if self.fail_times is not None and self.writes_failed >= self.fail_times:
            self.full = False


class ReadOnly:
    """``root`` (a directory, existing or not) and everything under it on a read-only file system:
    creating a directory, opening a file for writing, and renaming, replacing or removing a file
    there raise ``OSError(EROFS)`` naming the path, as a read-only mount does; reading works."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        import os

        self.root = os.path.realpath(root)
        self.refused: list[str] = []
        inside = self.inside

        def refuse(path: Any) -> None:
            if inside(path):
                self.refused.append(str(path))
                raise OSError(errno.EROFS, "Read-only file system", str(path))

        real_open, real_os_open = io.open, os.open
        real_mkdir, real_path_mkdir = os.mkdir, Path.mkdir
        real_replace, real_rename, real_unlink = os.replace, os.rename, os.unlink

        def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if any(c in mode for c in "wax+"):
                refuse(file)
            return real_open(file, mode, *args, **kwargs)

        def fake_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC):
                refuse(path)
            return real_os_open(path, flags, *args, **kwargs)

        def fake_path_mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
            refuse(self)
            real_path_mkdir(self, *args, **kwargs)

        def fake_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
            refuse(path)
            real_mkdir(path, *args, **kwargs)

        def two(real: Callable[..., Any]) -> Callable[..., Any]:
            def fake(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
                refuse(src)
                refuse(dst)
                return real(src, dst, *args, **kwargs)
            return fake

        def fake_unlink(path: Any, *args: Any, **kwargs: Any) -> None:
            refuse(path)
            real_unlink(path, *args, **kwargs)

        monkeypatch.setattr(io, "open", fake_open)
        monkeypatch.setattr(builtins, "open", fake_open)
        monkeypatch.setattr(os, "open", fake_os_open)
        monkeypatch.setattr(os, "mkdir", fake_mkdir)
        monkeypatch.setattr(Path, "mkdir", fake_path_mkdir)
        monkeypatch.setattr(os, "replace", two(real_replace))
        monkeypatch.setattr(os, "rename", two(real_rename))
        monkeypatch.setattr(os, "unlink", fake_unlink)

    def inside(self, path: Any) -> bool:
        import os

        if isinstance(path, int):  # a file descriptor: opened (for reading) before
            return False
        p = os.path.realpath(os.fspath(path))
        return p == self.root or p.startswith(self.root + os.sep)
