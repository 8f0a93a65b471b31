"""Early checks with a plain answer: a busy port before a server starts, a CSV file given where
JSONL is read."""

from __future__ import annotations

from pathlib import Path

from agentrag.errors import UserError


def check_port_free(host: str, port: int) -> None:
    """A :class:`UserError` when ``host:port`` cannot be bound (another server listens there), so
    a server command fails before it prints "serving on"."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise UserError(f"cannot serve on {host}:{port}: {exc.strerror or exc} (another server listens "
                            "there?); pick another --port, or stop that server") from None


def free_port(host: str) -> int:
    """A port the OS says is free on ``host`` (what ``--port 0`` serves on; printed with the URL)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def looks_like_csv(path: Path) -> bool:
    """A .csv/.tsv file, or one whose first line is comma- or tab-separated text, not JSON."""
    if path.suffix.lower() in (".csv", ".tsv"):
        return True
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            first = f.readline().strip()
    except OSError:
        return False
    return bool(first) and first[0] not in "{[" and ("," in first or "\t" in first)


def csv_hint(message: str) -> str:
    """For an "invalid JSON" error on a file that looks like CSV: a command that converts it to JSONL
    under a new name (never the input itself, never an existing file; QA rows get ``golden_answers``
    as a list, so the output loads as a FlashRAG dataset)."""
    import re
    import shlex
    import sys

    from agentrag.convert import free_name

    m = re.match(r"(.+?):\d+: invalid JSON", message)
    if m is None or not Path(m.group(1)).is_file() or not looks_like_csv(Path(m.group(1))):
        return ""
    src = m.group(1)
    dst = str(free_name(src))
    python = sys.executable or "python"  # the interpreter agentrag runs in: it can import agentrag.convert
    return (f"\n  {src} looks like CSV; inputs are JSONL (one JSON object per line). Convert it to a new file "
            f"(it refuses to write over one), then pass that file:\n"
            f"  {shlex.quote(python)} -m agentrag.convert {shlex.quote(src)} {shlex.quote(dst)}")


__all__ = ["check_port_free", "free_port", "looks_like_csv", "csv_hint"]
