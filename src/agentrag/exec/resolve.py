"""Pick an executor by name (``thread`` or ``ray``)."""

from __future__ import annotations

from agentrag.errors import UserError
from agentrag.exec.base import Executor, ThreadExecutor


def resolve_executor(name: str = "thread", workers: int = 4, address: str | None = None, *,
                     threads: int = 1) -> Executor:
    """``thread`` (default) or ``ray`` (``agentrag[ray]``; ``address`` of a running cluster;
    ``workers`` processes running ``threads`` items each)."""
    if name == "thread":
        return ThreadExecutor(workers)
    if name == "ray":
        try:
            from agentrag.exec.ray_executor import RayExecutor
        except ImportError as exc:  # the module itself, or ray missing inside it
            raise UserError("--executor ray needs Ray: pip install 'agentrag[ray]'") from exc
        return RayExecutor(workers=workers, address=address, threads=threads)
    raise UserError(f"unknown executor {name!r}; use 'thread' or 'ray'")
