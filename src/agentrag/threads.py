"""Thread settings and independent calls run at once, in one home.

llama.cpp's OpenMP worker threads spin while idle; on a busy 2-core machine that makes generation
about 10x slower, so every entry point that may load the embedded model (the CLI, eval and
synthesizer drivers, Ray workers, ``agentrag doctor``) calls :func:`passive_openmp` before any
OpenMP runtime starts (torch, onnxruntime and llama.cpp read the variable once, at start). An
explicit ``OMP_WAIT_POLICY`` from the user wins.

:func:`parallel_calls` runs the calls of one item that the algorithm allows to run in parallel
(SPRE rollouts of one node, the sub-questions of one EviPath action, Tracer's irreducibility
answers) at once, and gives back exactly what the sequential loop over them would have: results
in input order, the loop's early stop, and the exception the loop would have met first.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

#: the most threads one :func:`parallel_calls` starts (the LLM backend's request limit still caps
#: what reaches the server: threads beyond it wait for a free slot)
MAX_PARALLEL_CALLS = 16


def passive_openmp() -> None:
    """Make OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE``) unless the user set it."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def parallel_calls(calls: Sequence[Callable[[], T]], *, stop: Callable[[T], bool] | None = None,
                   max_workers: int = MAX_PARALLEL_CALLS, name: str = "agentrag-call") -> list[T]:
    """Run independent ``calls`` at once (at most ``max_workers`` threads); return what the loop
    ``for c in calls: r = c(); out.append(r); if stop(r): break`` returns, and raise what it raises.

    - Results come in input order.
    - ``stop``: the loop's early exit (e.g. a sub-answer that failed as data ends the action). The
      results after the first stopping one are dropped, and so is an exception of a later call:
      the loop would never have made that call. Calls not started yet are cancelled.
    - An exception (an outage, an :class:`~agentrag.errors.EndpointError`, a bug) is re-raised
      unchanged when the loop would have reached its call: the one of the earliest call in input
      order, after the calls before it finished. Calls not started yet are cancelled; the running
      ones are waited for, so no call of the item outlives it.

    The calling thread makes the first call and ``max_workers - 1`` pool threads the others; one
    call, or ``max_workers <= 1``, runs in the calling thread alone: the sequential loop itself.
    Calls made at once cost what they cost (a call after a stopping result was paid although its
    result is dropped); the records are those of the loop. Each call runs in a copy of the
    caller's :mod:`contextvars` context.
    """
    if len(calls) <= 1 or max_workers <= 1:
        out: list[T] = []
        for call in calls:
            out.append(call())
            if stop is not None and stop(out[-1]):
                break
        return out
    results: list[T] = []
    # the calling thread makes the first call itself: one thread fewer to start per group
    with ThreadPoolExecutor(min(max_workers - 1, len(calls) - 1), thread_name_prefix=name) as pool:
        futures: list[Future[T]] = [pool.submit(contextvars.copy_context().run, call) for call in calls[1:]]
        try:
            results.append(calls[0]())
            if stop is not None and stop(results[-1]):
                return results
            for fut in futures:
                results.append(fut.result())  # re-raises the call's own exception object
                if stop is not None and stop(results[-1]):
                    break
        finally:
            for fut in futures:
                fut.cancel()  # only the calls not started yet; leaving the block waits for the rest
    return results


__all__ = ["passive_openmp", "parallel_calls", "MAX_PARALLEL_CALLS"]
