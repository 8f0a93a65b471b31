"""The evaluation runner: run an agent over QA items, score each answer, resume after a kill.

Each finished item is appended to ``<run>/results.jsonl`` (an :class:`EvalResult`, keyed by item
id) as soon as it is scored, so a rerun with the same run directory skips it. Items whose agent
run fails with a :class:`~agentrag.errors.RunError` (e.g. the retriever is down) are logged and left
out, so a rerun retries them. ``summarize`` turns the results into ``metrics.json``.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from pydantic import Field

from agentrag.config import Config
from agentrag.errors import RunError, UserError
from agentrag.eval import metrics
from agentrag.eval.hops import diagnose, lower_hop_items
from agentrag.eval.judge import LLMJudge
from agentrag.eval.result import EvalResult
from agentrag.exec import Executor, Outcome, ThreadExecutor, WorkerTask
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
    concurrency: int = Field(default=4, ge=1)
    maxd: bool = False
    correct_by: CorrectBy = "auto"


def score_item(item: QAItem, traj: Trajectory, judge: LLMJudge | None = None,
               correct_by: CorrectBy = "auto") -> EvalResult:
    """Score one trajectory against its item: EM/F1/acc, judge, gold-passage recall, step count."""
    pred = traj.answer
    golds = item.golden_answers
    hits = [h for s in traj.steps for h in s.hits]
    recall = metrics.passage_recall(hits, item.supporting_passage_ids,
                                    item.metadata.get("supporting_titles") or ())
    res = EvalResult(
        id=item.id, question=item.question, golden_answers=golds, prediction=pred, hops=item.hops,
        em=metrics.em(pred, golds), f1=metrics.f1(pred, golds), acc=metrics.acc(pred, golds),
        recall=recall, steps=sum(1 for s in traj.steps if s.action is not None),
        finish_reason=traj.finish_reason, parent_id=item.metadata.get("lower_hop_parent"),
        level=item.metadata.get("lower_hop_level"),
        metadata={k: v for k, v in item.metadata.items() if k in ("type", "source")},
        trajectory=traj)
    if judge is not None:
        verdict = judge.assess(item.question, pred, golds)
        res.judge, res.judge_error = verdict.score, verdict.error
    if correct_by == "judge" or (correct_by == "auto" and res.judge is not None):
        res.correct = res.judge is not None and res.judge >= 1
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
            out.extend(lower_hop_items(item))
    return out


def run_and_score(agent: RunsItems, item: QAItem, judge: LLMJudge | None = None,
                  correct_by: CorrectBy = "auto") -> EvalResult | None:
    """Run ``agent`` on ``item`` and score it; ``None`` (logged) when the run fails with a
    :class:`RunError`, so the item is left unfinished and redone on the next run."""
    try:
        traj = agent.run(item)
    except RunError as exc:
        log.warning("item %s failed (%s: %s); rerun to retry it", item.id, type(exc).__name__, exc)
        return None
    return score_item(item, traj, judge, correct_by)


def evaluate(agent: RunsItems | WorkerTask, items: Sequence[QAItem], run_dir: str | os.PathLike[str] | RunDir, *,
             judge: LLMJudge | None = None, concurrency: int = 4, maxd: bool = False,
             correct_by: CorrectBy = "auto",
             on_start: Callable[[int, int], None] | None = None,
             on_result: Callable[[EvalResult | None], None] | None = None,
             executor: Executor | None = None) -> list[EvalResult]:
    """Evaluate ``agent`` on ``items`` (resuming from ``results.jsonl``); returns all results.

    ``agent`` is an agent object (run on threads of this process), or a picklable
    :class:`~agentrag.eval.worker.EvalTask` that builds the agent and judge from the config once per
    worker process (needed for a distributed executor such as Ray; ``judge`` is then its own).

    ``on_start(already_done, total)`` is called once before work starts; ``on_result`` once per
    processed item (``None`` for an item that failed). Items run on ``executor`` (default: a thread
    pool of ``concurrency`` workers); results are written here, in the driver.
    """
    if concurrency < 1:
        raise UserError(f"concurrency must be >= 1, got {concurrency!r}")
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    store = rd.stage("results", EvalResult)
    everything = expand_items(items, maxd)
    todo = [i for i in everything if i.id not in store]
    wanted = {i.id for i in everything}
    if on_start is not None:
        on_start(len(wanted) - len(todo), len(wanted))
    log.info("%d items to evaluate (%d already done in %s)", len(todo), len(wanted) - len(todo), store.path)

    def work(item: QAItem) -> EvalResult | None:
        return run_and_score(agent, item, judge, correct_by)  # type: ignore[arg-type]

    fn = agent if isinstance(agent, WorkerTask) else work  # a WorkerTask rebuilds agent + judge per worker
    failed = 0
    for out in (executor or ThreadExecutor(concurrency)).map(fn, todo):
        if isinstance(out.error, RunError) and out.error.is_retryable:  # e.g. a lost Ray worker
            log.warning("item %s failed (%s); rerun to retry it", out.item.id, out.error)
            out = Outcome(out.item, result=None)
        elif out.error is not None:
            raise out.error
        res = out.result
        if res is not None:
            store.append(res)
        failed += res is None
        if on_result is not None:
            on_result(res)
    if failed:
        log.warning("%d items failed; rerun the same command to retry them", failed)
    return [r for r in store.read() if r.id in wanted]


def summarize(results: Sequence[EvalResult], *, n_requested: int | None = None) -> dict[str, Any]:
    """Aggregate metrics (fractions in [0, 1]) and the hop-aware diagnosis."""
    main = [r for r in results if r.parent_id is None]

    def mean(xs: Sequence[float]) -> float | None:
        return round(sum(xs) / len(xs), 4) if xs else None

    judged = [r.judge for r in main if r.judge is not None]
    recalls = [r.recall for r in main if r.recall is not None]
    out: dict[str, Any] = {
        "n": len(main),
        "em": mean([r.em for r in main]),
        "f1": mean([r.f1 for r in main]),
        "acc": mean([r.acc for r in main]),
        "judge_mean": mean([float(j) for j in judged]),
        "judge_pass": mean([float(j >= 1) for j in judged]),
        "judge_failures": sum(1 for r in main if r.judge_error),
        "recall": mean(recalls),
        "mean_steps": mean([float(r.steps) for r in main]),
        "finish_reasons": dict(Counter(r.finish_reason for r in main)),
        "prompt_tokens": sum(r.trajectory.usage.prompt_tokens for r in main if r.trajectory),
        "completion_tokens": sum(r.trajectory.usage.completion_tokens for r in main if r.trajectory),
        "mean_elapsed_s": mean([r.trajectory.elapsed for r in main if r.trajectory]),
        "hops": diagnose(results),
    }
    if n_requested is not None:
        out["missing"] = max(0, n_requested - len(main))
    return out


__all__ = ["EvalConfig", "evaluate", "run_and_score", "score_item", "summarize", "expand_items"]
