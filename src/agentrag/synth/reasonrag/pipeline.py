"""ReasonRAG's stages over a run directory: questions -> MCTS trees -> greedy baseline ->
preference pairs -> DPO export (the driver, :mod:`.run`, calls them in this order).

Files (all append-only JSONL keyed by stable ids, written by the driver only):
``questions.jsonl``; ``events.jsonl`` (one :class:`IterationEvent` per MCTS iteration of every
question: the tree of a question is the replay of its events); ``trees.jsonl`` (the finished
tree of each question); ``greedy.jsonl`` (the reason_ground agent's trajectory per question);
``pairs.jsonl``; ``dpo/`` (TRL + LLaMA-Factory); ``metrics.json``, ``report.md``.

The search runs as one chain of tasks per question through the executor seam
(:meth:`SynthRun.flow`, the one failure policy): a task replays the question's events,
runs ``batch`` iterations (default 1) and returns the new events, which the driver appends before
it queues the question's next task — questions never wait for each other's rounds; when a
question's search ends, its greedy baseline (which needs only that question) is queued in the
same flow, so the baseline does not wait for the slowest search. At most
:func:`search_window` questions are started and unfinished at once (the next starts when one
ends), and only their events are in memory: the search's memory does not grow with the number of
questions. A kill
loses at most the iterations in flight (each task's events are appended as it returns) — and with the LLM cache and derived seeds,
their calls are answered from the cache on rerun. An outage or a lost worker leaves the question
unfinished (its events so far are kept); a rerun continues it. A 401/404 stops the run; nothing
more is written. The per-item functions are module-level over plain data, so on the Ray executor
they run in worker processes that rebuild the components with ``ReasonRagComponents.rebuild``
(see :mod:`agentrag.synth.worker`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.exec.flow import follow_up_bound
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import PreferencePair, QAItem, Trajectory
from agentrag.runs import JsonlStore, RunDir
from agentrag.synth.driver import PendingStage, SynthRun
from agentrag.synth.lazy import Selected
from agentrag.synth.reasonrag.config import ReasonRagConfig
from agentrag.synth.reasonrag.mcts import QuestionSearch, SearchBatch
from agentrag.synth.reasonrag.pairs import PAIR_GATES, extract_pairs
from agentrag.synth.reasonrag.tree import IterationEvent, SearchTree
from agentrag.synth.worker import ComponentsTask

log = logging.getLogger(__name__)


@dataclass
class ReasonRagComponents:
    """What a run talks to: the policy LLM (expansions, rollouts, greedy agent), the retriever,
    and the judge LLM of Eq. 6 (default: the policy LLM)."""

    llm: LLM
    retriever: Retriever
    judge: LLM | None = None
    rebuild: Callable[[], ReasonRagComponents] | None = None  # the recipe a worker process builds them from


class RunFiles:
    """The run directory's stage files."""

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self.questions: JsonlStore[QAItem] = run.stage_file("questions", QAItem)
        self.events: JsonlStore[IterationEvent] = run.stage_file("events", IterationEvent)
        self.trees: JsonlStore[SearchTree] = run.stage_file("trees", SearchTree)
        self.greedy: JsonlStore[Trajectory] = run.stage_file("greedy", Trajectory)
        self.pairs: JsonlStore[PreferencePair] = run.stage_file("pairs", PreferencePair)


def _iterate(cfg: ReasonRagConfig, batch: int, c: ReasonRagComponents,
             task: tuple[QAItem, list[IterationEvent]]) -> SearchBatch:
    item, evs = task
    return QuestionSearch(item, c.llm, c.retriever, cfg, judge=c.judge).iterate(evs, batch)


def _greedy_one(cfg: ReasonRagConfig, c: ReasonRagComponents, item: QAItem) -> Trajectory:
    """The greedy reason_ground agent (temperature 0, same max rounds and k) on one question. A
    request over the context window is data (the trajectory is kept, finish_reason
    ``context_limit``); any other LLM failure propagates out of the agent for the failure policy
    (outage -> unfinished, 401 -> stop)."""
    from agentrag.agents.config import ReasonGroundConfig
    from agentrag.agents.navigation import PlainNavigation
    from agentrag.agents.reason_ground import ReasonGroundAgent

    m = cfg.mcts
    agent = ReasonGroundAgent(c.llm, PlainNavigation(c.retriever),
                              ReasonGroundConfig(max_steps=max(1, m.max_iter - 1), top_k=m.top_k, temperature=0.0,
                                                 max_tokens=m.max_tokens, seed=cfg.seed, doc_chars=m.doc_chars))
    return agent.run(item)


#: the fewest questions a search keeps started at once (:func:`search_window`)
MIN_WINDOW = 32


def search_window(ctx: SynthRun) -> int:
    """How many questions :func:`search` keeps started (searched, no tree yet) at once: the flow's
    bound on waiting follow-ups (:func:`agentrag.exec.flow.follow_up_bound`: four times the
    executor's in-flight limit, at least :data:`MIN_WINDOW`; each question has one task at a
    time). Only these questions' events are in memory."""
    return max(MIN_WINDOW, follow_up_bound(ctx.executor))


def stored_events(files: RunFiles, ids: set[str]) -> dict[str, list[IterationEvent]]:
    """The stored events of the questions ``ids`` (one pass over ``events.jsonl``)."""
    out: dict[str, list[IterationEvent]] = {}
    for ev in files.events:
        if ev.question_id in ids:
            out.setdefault(ev.question_id, []).append(ev)
    return out


def search(ctx: SynthRun, cfg: ReasonRagConfig, comps: ReasonRagComponents, files: RunFiles,
           items: list[QAItem], batch: int = 1, window: int | None = None) -> None:
    """MCTS for every question without a finished tree, each question advancing on its own (see
    the module docstring; the tasks run through :meth:`SynthRun.flow`).

    Memory: at most ``window`` questions (:func:`search_window`) are started and unfinished at
    once; a question's events travel in its task (the stored ones plus those of its earlier
    tasks) and are dropped once its tree is written or it is left unfinished, and the next
    question starts then. Only the stored events of pending questions are loaded (a run of this
    code leaves at most ``window`` questions with events and no tree). So the search holds the
    events of at most ``window`` questions, whatever the number of questions."""
    for it in items:
        files.questions.append(it)
    pending = [q for q in items if q.id not in files.trees]
    stored = stored_events(files, {q.id for q in pending})  # held until the question starts
    budget = cfg.mcts.iterations
    total = len(items) * budget
    done = [(len(items) - len(pending)) * budget + sum(min(budget, len(v)) for v in stored.values())]
    if ctx.progress:
        ctx.progress("mcts", done[0], total)
    Task = tuple[QAItem, list[IterationEvent]]
    starts = iter(pending)

    def start(n: int) -> list[tuple[str, Any]]:
        """The first tasks of the next ``n`` questions not started yet."""
        return [("mcts", (q, stored.pop(q.id, []))) for q in islice(starts, n)]

    greedy = cfg.greedy_baseline

    def write(task: Task, out: SearchBatch) -> list[tuple[str, Any]]:
        """Write a task's events; return the question's next task: its next iterations, or (its
        search ended) its greedy baseline and the next question's first task, or (left
        unfinished) the next question's first task."""
        item = task[0]
        for ev in out.events:
            files.events.append(ev)
        evs = [*task[1], *out.events]  # the question's events so far: held by its next task only
        done[0] += len(out.events)
        nxt: list[tuple[str, Any]] = []
        if out.status in ("done", "exhausted"):
            tree = SearchTree.replay(item.id, item.question, item.golden_answers, evs)
            tree.status = out.status
            files.trees.append(tree)
            done[0] += budget - tree.iterations
            if greedy and item.id not in files.greedy:
                nxt = [("greedy", item)]
            nxt += start(1)
        elif out.status == "outage":  # the events so far are kept on disk; a rerun continues the search
            ctx.unfinished("mcts", item.id, out.outage or "outage")
            nxt = start(1)
        else:
            nxt = [("mcts", (item, evs))]
        if ctx.progress:
            ctx.progress("mcts", done[0], total)
        return nxt

    task = ComponentsTask(partial(_iterate, cfg, batch), comps, comps.rebuild, what="ReasonRAG components")
    steps: dict[str, tuple[Callable[[Any], Any], Any]] = {"mcts": (task, write)}
    if greedy:
        def write_greedy(_item: QAItem, traj: Trajectory) -> None:
            files.greedy.append(traj)

        steps["greedy"] = (_greedy_task(cfg, comps), write_greedy)
    size = window or search_window(ctx)
    # a task that fails (a bug, a lost worker) starts no next question: its slot is refilled by
    # another flow over the questions not started yet
    while first := start(size):
        ctx.flow(steps, first, progress=["greedy"])


def _greedy_task(cfg: ReasonRagConfig, comps: ReasonRagComponents) -> ComponentsTask:
    return ComponentsTask(partial(_greedy_one, cfg), comps, comps.rebuild, what="ReasonRAG components")


def greedy_catch_up(cfg: ReasonRagConfig, comps: ReasonRagComponents, files: RunFiles,
                    items: list[QAItem]) -> PendingStage[QAItem, Trajectory]:
    """The greedy reason_ground agent per searched question without one (for the report): those
    searched in an earlier run; this run's ran as soon as their search ended (:func:`search`; one
    it left unfinished waits for a rerun)."""
    return PendingStage("greedy", _greedy_task(cfg, comps),
                        lambda: [q for q in items if q.id in files.trees and q.id not in files.greedy],
                        lambda _item, traj: files.greedy.append(traj))


#: the file holding the settings the stored pairs were built with
PAIR_SETTINGS = "pairs.settings.json"


def pair_settings(cfg: ReasonRagConfig) -> dict[str, Any]:
    """Every setting the pairs depend on (the trees aside): a change means the stored pairs are stale."""
    v = cfg.value
    return {"gates": list(PAIR_GATES), "value": v.kind, "alpha_label": v.label_alpha, "min_gap": cfg.pairs.min_gap,
            "include_untagged": cfg.pairs.include_untagged, "max_iter": cfg.mcts.max_iter}


def refresh_pairs(cfg: ReasonRagConfig, files: RunFiles) -> bool:
    """Drop the stored pairs when they were built with other pair or value settings (they are
    derived data: :func:`build_pairs` rebuilds them from the stored trees, no LLM call). Returns
    whether they were dropped."""
    want = pair_settings(cfg)
    path = files.run.file(PAIR_SETTINGS)
    have = json.loads(path.read_text()) if path.exists() else None
    stale = have != want and (have is not None or len(files.pairs) > 0)
    if stale:
        log.info("pair settings changed (%s -> %s): rebuilding pairs.jsonl from the stored trees", have, want)
        files.pairs.path.unlink(missing_ok=True)
        files.pairs = files.run.stage_file("pairs", PreferencePair)
    if have != want:
        files.run.write_json(PAIR_SETTINGS, want)
    return stale


def build_pairs(cfg: ReasonRagConfig, files: RunFiles, trees: Iterable[SearchTree]) -> tuple[int, Counter[str]]:
    """The preference pairs of every finished tree (appended once by id; all rebuilt when the pair
    settings changed, :func:`refresh_pairs`); returns the number of sibling pairs considered and
    the rejections by gate. ``trees`` is read once, tree by tree (a :class:`Selected` streams
    ``trees.jsonl``)."""
    refresh_pairs(cfg, files)
    rejected: Counter[str] = Counter()
    kept = 0
    for tree in trees:
        for p in extract_pairs(tree, alpha_label=cfg.value.label_alpha, min_gap=cfg.pairs.min_gap,
                               max_iter=cfg.mcts.max_iter, include_untagged=cfg.pairs.include_untagged,
                               rejected=rejected, labels=cfg.value.kind):
            files.pairs.append(p)
            kept += 1
    return kept + sum(rejected.values()), rejected


#: the files of the DPO export in ``dpo/`` (:func:`agentrag.export.dpo.write_dpo_export`), card included
DPO_FILES = ("trl_dpo.jsonl", "dpo_sharegpt.jsonl", "dpo_alpaca.jsonl", "dataset_info.json", "README.md")


def clear_export(files: RunFiles) -> list[str]:
    """Remove the run's earlier DPO export (the files of :data:`DPO_FILES` in ``dpo/``, written by
    this run directory's earlier runs; nothing else), so no export, card or dataset_info outlives
    the configuration or the pairs it was made from. Returns the names removed."""
    out = files.run.path / "dpo"
    removed = []
    for name in DPO_FILES:
        path = out / name
        if path.is_file():
            path.unlink()
            removed.append(name)
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    return removed


def export(cfg: ReasonRagConfig, files: RunFiles, pairs: Iterable[PreferencePair]) -> dict[str, Any]:
    """The DPO export (TRL + LLaMA-Factory) of every pair, when enabled and there is one
    (``pairs`` is read once per export file when it is not an iterator: a :class:`Selected`).
    Disabled, or with no pair, an earlier export of this run directory is removed (it would be
    stale: the card and dataset_info would name pairs this configuration did not make)."""
    if not cfg.export:
        removed = clear_export(files)
        if removed:
            log.info("export disabled: removed the earlier export's dpo/%s", ", dpo/".join(removed))
        return {"skipped": "export disabled in config", "exported": 0}
    if next(iter(pairs), None) is None:
        clear_export(files)
        return {"skipped": "no preference pair passed the filters", "exported": 0}
    from agentrag.export.dpo import write_dpo_export

    return write_dpo_export(files.run.path / "dpo", pairs)


def tree_settings(cfg: ReasonRagConfig) -> dict[str, Any]:
    """Every setting the stored trees depend on (the search and its values; the pair labels,
    filters and export aside, which are rebuilt from the trees)."""
    v = cfg.value.model_dump(mode="json")
    v.pop("alpha_label", None)
    v.pop("alpha", None)  # resolved into alpha_search (and alpha_label)
    return {"seed": cfg.seed, "mcts": cfg.mcts.model_dump(mode="json"), "value": v}


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(obj, dict):
        return {prefix: obj}
    out: dict[str, Any] = {}
    for k, v in obj.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def check_tree_settings(cfg: ReasonRagConfig, out: Path) -> None:
    """Refuse to resume a run directory whose stored trees or search events were made with other
    search or value settings (its ``config.yaml``): a :class:`UserError` listing the differing
    keys, as the CLI does, for every caller (the Python API too). A larger ``mcts.iterations``
    is such a change: the finished trees would keep their old size beside new ones."""
    import yaml

    stored = out / "config.yaml"
    if not stored.is_file() or not any((out / f"{n}.jsonl").is_file() and (out / f"{n}.jsonl").stat().st_size
                                       for n in ("trees", "events")):
        return
    try:
        old_cfg = type(cfg).model_validate(yaml.safe_load(stored.read_text(encoding="utf-8")) or {})
    except (ValueError, yaml.YAMLError):
        return  # a config of another shape: the driver's own checks report it
    old, new = _flat(tree_settings(old_cfg)), _flat(tree_settings(cfg))
    diff = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    if diff:
        raise UserError(f"{out} holds MCTS trees searched with other settings (its config.yaml); resuming it with "
                        "this configuration would mix trees of two searches:\n  " + "\n  ".join(diff) +
                        "\nUse a new output directory (the CLI: --force-new-config writes OUT.2 beside it).")


__all__ = ["ReasonRagComponents", "RunFiles", "search", "search_window", "MIN_WINDOW", "greedy_catch_up", "build_pairs", "export", "Selected", "pair_settings",
           "refresh_pairs", "PAIR_SETTINGS", "DPO_FILES", "clear_export", "tree_settings", "check_tree_settings"]
