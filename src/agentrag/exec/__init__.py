"""The executor seam: map per-item work over pending records, results streamed back as they finish.

Every pipeline (eval items; RAGShaper seeds, paths, questions; EviPath items; ReasonRAG
questions; Tracer chains) hands its per-item function to an :class:`Executor` and consumes the
:class:`Outcome` stream in the driver. The driver is the only writer of the run's files, so resume
by id, no duplicates and no loss hold whatever executor runs the work.

Rules for the per-item function, so that a distributed executor can run it too:

- it returns the record(s) to write and does not write run files itself;
- it raises for an outage (``RunError`` with ``is_retryable``): the item is then left unfinished
  and redone on the next run, never recorded as a wrong result; :func:`run_stage` applies the
  whole failure policy (:mod:`agentrag.exec.policy`);
- for a distributed executor it must be picklable and rebuild its backends (LLM, KB, agent) from
  the resolved config inside the worker, once per worker process (see :class:`WorkerTask`).

``ThreadExecutor`` is the default (today's behaviour: a thread pool inside one process).
"""

from __future__ import annotations

from agentrag.exec.base import Executor, Outcome, ThreadExecutor, WorkerTask
from agentrag.exec.flow import run_flow
from agentrag.exec.policy import ItemBugs, StageResult, item_key, run_stage
from agentrag.exec.resolve import resolve_executor
from agentrag.progress import Progress

__all__ = ["Executor", "Outcome", "Progress", "ThreadExecutor", "WorkerTask", "resolve_executor", "run_stage",
           "StageResult", "item_key", "ItemBugs", "run_flow"]
