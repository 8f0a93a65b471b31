"""The evaluation runner: run an agent over QA items, score each answer, resume after a kill.

Each finished item is appended to ``<run>/results.jsonl`` (an :class:`EvalResult`, keyed by item
id) as soon as it is scored, so a rerun with the same run directory skips it. Items run under the
one failure policy (:func:`agentrag.exec.run_stage`): an outage of the agent's LLM, the retriever
or the judge leaves the item *unfinished* (not written, not counted in the metrics, redone on
rerun); a 401/403/404 from any endpoint stops the evaluation; any other exception is a bug (the
item stays unfinished, the traceback is logged). A request over the context window is data: the
trajectory ends with ``finish_reason="context_limit"`` and is scored as a (flagged) wrong answer.
``<run>/unfinished.json`` lists the unfinished items of the last invocation with the reason.
``summarize`` turns the results into ``metrics.json``; :func:`agentrag.eval.run.run_eval` does it all.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import Field

from agentrag.config import Config
from agentrag.errors import LLMError, UserError, storage_error
from agentrag.eval import metrics
from agentrag.eval.hops import MAXD_MIN_HOPS, lower_hop_items
from agentrag.eval.judge import LLMJudge
from agentrag.eval.result import EvalResult
from agentrag.eval.summary import Summary
from agentrag.exec import Executor, Progress, StageResult, ThreadExecutor, WorkerTask, run_stage
from agentrag.llm.adaptive import ITEMS_IN_FLIGHT_HELP, default_items_in_flight
from agentrag.records import QAItem, Trajectory
from agentrag.runs import RunDir

log = logging.getLogger(__name__)

CorrectBy = Literal["auto", "em", "acc", "judge"]


class RunsItems(Protocol):
    """What the runner needs of an agent (:class:`agentrag.agents.base.Agent` satisfies it)."""

    def run(self, item: QAItem) -> Trajectory: ...


class EvalConfig(Config):
    """Settings of ``agentrag eval`` (CLI flags fill the top-level keys)."""

    dataset: str = ""
    fmt: str = "auto"
    kb: str = ""
    agent: str = "react"
    agent_config: dict[str, Any] = Field(default_factory=dict)
    llm: str = "embedded"
    judge: str | None = None
    limit: int | None = None
    concurrency: int | None = Field(default=None, ge=1, description=ITEMS_IN_FLIGHT_HELP)
    maxd: bool = False
    correct_by: CorrectBy = "auto"

    def items_in_flight(self) -> int:
        """``concurrency``, or its default for the agent's and judge's LLMs."""
        return self.concurrency or default_items_in_flight(self.llm, self.judge)


#: the tools that give the final answer: calling one is not a retrieval step
ANSWER_TOOLS = ("Final_Answer",)


def retrieval_topks(traj: Trajectory) -> list[int]:
    """The top-k of every retrieval call of ``traj``: ``metadata["topk_per_step"]`` (recorded by
    the retrieval tool), else, for older trajectories, one entry (-1: unknown) per executed tool
    call that is not an answer tool."""
    recorded = traj.metadata.get("topk_per_step")
    if isinstance(recorded, list):
        return [int(k) for k in recorded]
    return [-1 for s in traj.steps
            if s.action is not None and s.action.name not in ANSWER_TOOLS and (s.observation is not None or s.hits)]


def score_item(item: QAItem, traj: Trajectory, judge: LLMJudge | None = None,
               correct_by: CorrectBy = "auto") -> EvalResult:
    """Score one trajectory against its item: EM/F1/acc, judge, gold-passage recall, retrieval
    steps. With a judge (and ``correct_by`` auto/judge) the verdict is the judge's; judge output
    that is no verdict leaves ``correct=None`` and ``judge_error`` set (never replaced by EM); a
    judge outage is raised (the item stays unfinished)."""
    pred = traj.answer
    topks = retrieval_topks(traj)
    golds = item.golden_answers
    hits = [h for s in traj.steps for h in s.hits]
    recall = metrics.passage_recall(hits, item.supporting_passage_ids,
                                    item.metadata.get("supporting_titles") or ())
    res = EvalResult(
        id=item.id, question=item.question, golden_answers=golds, prediction=pred, hops=item.hops,
        em=metrics.em(pred, golds), f1=metrics.f1(pred, golds), acc=metrics.acc(pred, golds),
        recall=recall, steps=len(topks), topk_per_step=[k for k in topks if k > 0],
        finish_reason=traj.finish_reason, parent_id=item.metadata.get("lower_hop_parent"),
        level=item.metadata.get("lower_hop_level"),
        metadata={k: v for k, v in item.metadata.items() if k in ("type", "source")},
        trajectory=traj)
    if judge is not None:
        verdict = judge.assess(item.question, pred, golds)
        res.judge, res.judge_error = verdict.score, verdict.error
    if correct_by == "judge" or (correct_by == "auto" and judge is not None):
        res.correct = None if res.judge is None else res.judge >= 1
    elif correct_by == "acc":
        res.correct = res.acc >= 1.0
    else:
        res.correct = res.em >= 1.0
    return res


def expand_items(items: Sequence[QAItem], maxd: bool) -> list[QAItem]:
    """The items, followed (when ``maxd``) by each item's lower-hop questions."""
    out = list(items)
    if maxd:
        for item in items:
            if (item.hops or 0) >= MAXD_MIN_HOPS:  # Tracer measures MaxD on 3- and 4-hop questions
                out.extend(lower_hop_items(item))
    return out


def run_and_score(agent: RunsItems, item: QAItem, judge: LLMJudge | None = None,
                  correct_by: CorrectBy = "auto") -> EvalResult:
    """Run ``agent`` on ``item`` and score it. Outages and endpoint errors of the agent's LLM, the
    retriever or the judge are raised (the failure policy leaves the item unfinished or stops the
    run); an agent that swallowed an LLM failure into ``finish_reason="llm_error"`` gets it raised
    again as an outage, so it is never scored."""
    traj = agent.run(item)
    if traj.finish_reason == "llm_error":
        raise LLMError(str(traj.metadata.get("error") or "the agent's LLM failed"), is_retryable=True)
    return score_item(item, traj, judge, correct_by)


def run_pending(agent: RunsItems | WorkerTask, items: Sequence[QAItem], run: RunDir, *,
                judge: LLMJudge | None = None, concurrency: int = 4, maxd: bool = False,
                correct_by: CorrectBy = "auto", progress: Progress | None = None,
                on_result: Callable[[EvalResult], object] | None = None,
                executor: Executor | None = None) -> tuple[Iterator[EvalResult], StageResult]:
    """Evaluate the items of ``items`` (and their lower-hop questions when ``maxd``) not yet in
    ``results.jsonl``; returns a one-pass iterator over the results of every item asked for (read
    back from the file record by record, in file order) and this invocation's
    :class:`~agentrag.exec.StageResult`. Writes ``unfinished.json``. Once every item asked for is
    finished, ``results.jsonl`` is put in input order with its timings in ``results.timings.jsonl``
    (:meth:`~agentrag.runs.JsonlStore.finish`): a resumed run's file equals an uninterrupted run's."""
    if concurrency < 1:
        raise UserError(f"concurrency must be >= 1, got {concurrency!r}")
    if correct_by == "judge" and judge is None and not isinstance(agent, WorkerTask):
        raise UserError("correct_by='judge' needs a judge: pass --judge REF (or use auto, em or acc)")
    store = run.stage_file("results", EvalResult)
    everything = expand_items(items, maxd)
    todo = [i for i in everything if i.id not in store]
    order = [i.id for i in everything]
    wanted = set(order)
    del everything
    log.info("%d items to evaluate (%d already done in %s)", len(todo), len(wanted) - len(todo), store.path)

    def work(item: QAItem) -> EvalResult:
        return run_and_score(agent, item, judge, correct_by)  # type: ignore[arg-type]

    def write(_item: QAItem, res: EvalResult) -> None:
        try:
            store.append(res)
        except OSError as exc:  # a full disk or a read-only file system: a one-line error, the run resumes
            raise storage_error(exc, store.path) from exc
        if on_result is not None:
            on_result(res)

    fn = agent if isinstance(agent, WorkerTask) else work  # a WorkerTask rebuilds agent + judge per worker
    stage = run_stage(executor or ThreadExecutor(concurrency), fn, todo, stage="eval", progress=progress,
                      on_result=write)
    del todo
    unfinished = {**stage.unfinished, **stage.bugs}
    run.write_json("unfinished.json", unfinished)
    if unfinished:
        log.warning("%d items unfinished; rerun the same command to retry them", len(unfinished))
    elif stage.total:  # something was written now: the final form (an untouched file stays as it is)
        store.finish(order)
    return (r for r in store if r.id in wanted), stage


def evaluate_stage(agent: RunsItems | WorkerTask, items: Sequence[QAItem], run_dir: str | os.PathLike[str] | RunDir,
                   *, judge: LLMJudge | None = None, concurrency: int = 4, maxd: bool = False,
                   correct_by: CorrectBy = "auto",
                   progress: Progress | None = None,
                   on_result: Callable[[EvalResult], object] | None = None,
                   executor: Executor | None = None) -> tuple[list[EvalResult], StageResult]:
    """:func:`evaluate`, also returning the :class:`~agentrag.exec.StageResult` of this invocation
    (its ``unfinished`` and ``bugs``; ``done`` counts the items scored now, ``total`` the pending ones)."""
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    try:
        results, stage = run_pending(agent, items, rd, judge=judge, concurrency=concurrency, maxd=maxd,
                                     correct_by=correct_by, progress=progress, on_result=on_result,
                                     executor=executor)
        return list(results), stage
    finally:
        if not isinstance(run_dir, RunDir):
            rd.close()


def evaluate(agent: RunsItems | WorkerTask, items: Sequence[QAItem], run_dir: str | os.PathLike[str] | RunDir, *,
             judge: LLMJudge | None = None, concurrency: int = 4, maxd: bool = False,
             correct_by: CorrectBy = "auto",
             progress: Progress | None = None,
             on_result: Callable[[EvalResult], object] | None = None,
             executor: Executor | None = None) -> list[EvalResult]:
    """Evaluate ``agent`` on ``items`` (resuming from ``results.jsonl``); returns all results.

    ``agent`` is an agent object (run on threads of this process), or a picklable
    :class:`~agentrag.eval.worker.EvalTask` that builds the agent and judge from the config once per
    worker process (needed for a distributed executor such as Ray; ``judge`` is then its own).

    ``progress("eval", done, total)`` follows the pending items; ``on_result`` is called once per
    item scored (in this thread, after it is written). Items run on ``executor`` (default: a thread
    pool of ``concurrency`` workers) under the failure policy (module docstring); the unfinished
    items of this invocation (outages and bugs) go to ``unfinished.json`` (id -> reason). An
    endpoint error (401/403/404) or an unwritable run directory is raised.
    """
    return evaluate_stage(agent, items, run_dir, judge=judge, concurrency=concurrency, maxd=maxd,
                          correct_by=correct_by, progress=progress, on_result=on_result, executor=executor)[0]


def outage_kind(reason: str) -> str:
    """The error class named at the start of an unfinished item's reason (``LLMError`` ...)."""
    head = reason.split(":", 1)[0].strip()
    return head if head.isidentifier() else "other"


def summarize(results: Iterable[EvalResult], *, n_requested: int | None = None,
              unfinished: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Aggregate metrics (fractions in [0, 1]) and the hop-aware diagnosis; ``unfinished`` (id ->
    reason, from ``unfinished.json``) is reported as a count and a count per error kind. One pass
    over ``results`` (a list, or a run's ``results.jsonl`` read record by record), none of them
    held (:class:`agentrag.eval.summary.Summary`)."""
    acc = Summary()
    for r in results:
        acc.add(r)
    out = acc.result()
    if n_requested is not None:
        out["missing"] = max(0, n_requested - acc.n)
    if unfinished is not None:
        out["unfinished"] = len(unfinished)
        out["unfinished_reasons"] = dict(Counter(outage_kind(v) for v in unfinished.values()))
    return out


__all__ = ["EvalConfig", "evaluate", "evaluate_stage", "run_pending", "run_and_score", "score_item", "summarize", "expand_items",
           "retrieval_topks", "ANSWER_TOOLS", "CorrectBy"]
