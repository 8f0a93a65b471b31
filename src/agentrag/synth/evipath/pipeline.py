"""EviPath orchestration: items -> plans (Eq. 3) -> iterations + sub-answers (Eq. 4–6) ->
selections (Eq. 6) -> gates -> conversations (Eq. 7) -> SFT export and report.

Every stage is an append-only JSONL of the run directory keyed by stable ids; per-item work runs
through :mod:`agentrag.exec` (the function returns records, the driver writes them). Rerunning
resumes: an item whose path has its ``last`` iteration record is done, sub-answers with a
selection are skipped, and with the run's LLM cache no call is paid twice. An outage (a
retryable LLM or retrieval error after the backend's retries) or a lost worker leaves the item
unfinished. The per-item functions are module-level and take plain data, so on the Ray executor
they run in worker processes that rebuild the components with ``EviPathComponents.rebuild``
(see :mod:`agentrag.synth.worker`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from agentrag.errors import RunError
from agentrag.eval.metrics import f1
from agentrag.exec import Executor, ThreadExecutor, run_items
from agentrag.kb.base import Embedder, Retriever
from agentrag.llm.base import LLM
from agentrag.runs import RunDir
from agentrag.synth.common import Progress
from agentrag.synth.evipath.answering import synthesize_selection
from agentrag.synth.evipath.config import EviPathConfig
from agentrag.synth.evipath.conversations import executor_messages, planner_messages
from agentrag.synth.evipath.gates import check_path
from agentrag.synth.evipath.planning import explore, failed_plan_path, make_plan
from agentrag.synth.evipath.report import metrics as report_metrics
from agentrag.synth.evipath.report import sections as report_sections
from agentrag.synth.evipath.schema import (
    ConversationRecord,
    EviItem,
    GateRecord,
    IterationRecord,
    PlanRecord,
    SelectionRecord,
    SubAnswerRecord,
)
from agentrag.synth.worker import ComponentsTask

log = logging.getLogger(__name__)


PathOut = tuple[PlanRecord, list[IterationRecord], list[SubAnswerRecord], list[SelectionRecord]]


@dataclass
class EviPathComponents:
    """What a run talks to: the planner and executor LLMs (the same object for one LLM), φ of Eq. 6
    (``embedder``, built on first use when a factory is given) and, for the deductive mode, the KB."""

    planner: LLM
    executor: LLM
    embedder: Embedder | Callable[[], Embedder]
    retriever: Retriever | None = None
    rebuild: Callable[[], EviPathComponents] | None = None  # the recipe a worker process builds them from
    _phi: Embedder | None = field(default=None, repr=False)

    def phi(self) -> Embedder:
        if self._phi is None:
            emb = self.embedder
            self._phi = emb if isinstance(emb, Embedder) else emb()
        return self._phi


def _unfinished(stage: str, failed: list[Any]) -> None:
    """Outages leave items unfinished (redone on rerun); anything else escaping is a bug."""
    for out in failed:
        if not (isinstance(out.error, RunError) and out.error.is_retryable):
            raise out.error
    if failed:
        log.warning("%s: %d items unfinished after an outage; rerun the same command to retry them", stage, len(failed))


def _abductive_path(cfg: EviPathConfig, c: EviPathComponents, task: tuple[EviItem, PlanRecord | None]) -> PathOut:
    item, plan = task
    plan = plan or make_plan(c.planner, item, cfg)
    if plan.status != "ok":
        return plan, failed_plan_path(item, plan), [], []
    iterations, subs = explore(c.planner, c.executor, item, plan, cfg)
    return plan, iterations, subs, []


def _deductive_path(cfg: EviPathConfig, c: EviPathComponents, task: tuple[EviItem, PlanRecord | None]) -> PathOut:
    from agentrag.agents.navigation import PlainNavigation
    from agentrag.agents.planner_executor import PlannerExecutorAgent, PlannerExecutorConfig
    from agentrag.synth.evipath.deductive import run_agent, trajectory_records

    item = task[0]
    if c.retriever is None:
        from agentrag.errors import UserError

        raise UserError("--mode deductive needs a knowledge base: pass --kb DIR")
    acfg = PlannerExecutorConfig(top_k=cfg.agent_top_k, max_steps=cfg.agent_max_steps,
                                 max_tokens=cfg.planner.max_tokens, temperature=cfg.planner.temperature,
                                 executor_max_tokens=cfg.executor.max_tokens)
    agent = PlannerExecutorAgent(c.planner, PlainNavigation(c.retriever), acfg, executor_llm=c.executor)
    traj = run_agent(agent, item)
    if traj.finish_reason == "llm_error":  # the agent swallowed an LLM failure: redo the item on rerun
        raise RunError(str(traj.metadata.get("error", "LLM error")), is_retryable=True)
    return trajectory_records(item, traj, c.phi(), cfg, acfg.max_passage_chars)


def _select_one(cfg: EviPathConfig, c: EviPathComponents, task: tuple[SubAnswerRecord, EviItem]) -> SelectionRecord:
    sub, item = task
    return synthesize_selection(c.executor, c.phi(), item, sub.id, sub.question, sub.answer, cfg.executor, cfg.seed)


class EviPathPipeline:
    """Runs every stage over a run directory (see the module docstring)."""

    def __init__(self, run: RunDir, cfg: EviPathConfig, comps: EviPathComponents, progress: Progress | None = None,
                 executor: Executor | None = None) -> None:
        self.run_dir, self.cfg, self.c, self.progress = run, cfg, comps, progress
        self.executor: Executor = executor or ThreadExecutor(cfg.concurrency)
        self.items = run.stage("items", EviItem)
        self.plans = run.stage("plans", PlanRecord)
        self.iterations = run.stage("iterations", IterationRecord)
        self.sub_answers = run.stage("sub_answers", SubAnswerRecord)
        self.selections = run.stage("selections", SelectionRecord)
        self.gates = run.stage("gates", GateRecord)
        self.conversations = run.stage("conversations", ConversationRecord)
        self.unfinished: dict[str, int] = {}

    # --- stages -------------------------------------------------------------------------------
    def add_items(self, items: list[EviItem]) -> None:
        for it in items:
            self.items.append(it)

    def finished_paths(self) -> dict[str, list[IterationRecord]]:
        by_item: dict[str, list[IterationRecord]] = {}
        for it in self.iterations:
            by_item.setdefault(it.item_id, []).append(it)
        return {k: sorted(v, key=lambda r: r.n) for k, v in by_item.items() if any(r.last for r in v)}

    def _task(self, fn: Callable[..., Any]) -> ComponentsTask:
        return ComponentsTask(partial(fn, self.cfg), self.c, self.c.rebuild, what="EviPath components")

    def synthesize_paths(self, wanted: set[str]) -> None:
        done = self.finished_paths()
        plans = {p.id: p for p in self.plans}
        todo = [(i, plans.get(i.id)) for i in self.items if i.status == "ok" and i.id in wanted and i.id not in done]
        fn = self._task(_deductive_path if self.cfg.mode == "deductive" else _abductive_path)

        def write(_item: Any, out: PathOut) -> None:
            plan, iterations, subs, sels = out
            self.plans.append(plan)
            for r in subs:
                self.sub_answers.append(r)
            for s in sels:
                self.selections.append(s)
            for it in iterations:  # the `last` record goes last: it marks the item done
                self.iterations.append(it)

        failed = run_items(self.executor, fn, todo, stage="paths", progress=self.progress, on_result=write)
        self.unfinished["paths"] = len(failed)
        _unfinished("paths", failed)

    def select(self) -> None:
        """Eq. 6 selections + executor thoughts for the sub-answers of paths that reached an answer
        good enough for the final-answer gate (the others are rejected anyway; no calls spent)."""
        if self.cfg.mode == "deductive":
            return
        items = {i.id: i for i in self.items}
        paths = self.finished_paths()
        good = {k for k, v in paths.items() if v[-1].status == "ok" and v[-1].answer is not None
                and f1(v[-1].answer, items[k].answers) > self.cfg.gates.f1_threshold}
        todo = [(s, items[s.item_id]) for s in self.sub_answers
                if s.item_id in good and s.status == "ok" and s.id not in self.selections]

        def write(_sub: Any, rec: SelectionRecord) -> None:
            self.selections.append(rec)

        failed = run_items(self.executor, self._task(_select_one), todo, stage="select", progress=self.progress,
                           on_result=write)
        self.unfinished["selections"] = len(failed)
        _unfinished("selections", failed)

    def gate_and_convert(self) -> None:
        items = {i.id: i for i in self.items}
        plans = {p.id: p for p in self.plans}
        subs: dict[str, list[SubAnswerRecord]] = {}
        for s in self.sub_answers:
            subs.setdefault(s.item_id, []).append(s)
        sels: dict[str, SelectionRecord] = {s.id: s for s in self.selections}
        for item_id, iterations in self.finished_paths().items():
            if item_id in self.gates or item_id not in plans:
                continue
            item_sels = [sels[s.id] for s in subs.get(item_id, []) if s.id in sels]
            expected = [s for s in subs.get(item_id, []) if s.status == "ok"]
            if self.cfg.mode == "abductive" and iterations[-1].status == "ok" and len(item_sels) < len(expected):
                if f1(iterations[-1].answer, items[item_id].answers) > self.cfg.gates.f1_threshold:
                    continue  # selections unfinished (outage): gate on rerun
            gate = check_path(items[item_id], plans[item_id], iterations, item_sels, self.cfg.gates)
            self.conversations.append(ConversationRecord(
                id=f"{item_id}-planner", item_id=item_id, role="planner", kept=gate.passed,
                messages=planner_messages(items[item_id], plans[item_id], iterations)))
            for sel in item_sels:
                if sel.select is not None:
                    self.conversations.append(ConversationRecord(
                        id=f"{sel.id}-executor", item_id=item_id, role="executor",
                        kept=gate.passed and sel.id in gate.executor_kept, messages=executor_messages(sel)))
            self.gates.append(gate)  # last: marks the item gated

    def export(self) -> dict[str, Any]:
        if not self.cfg.export:
            return {"skipped": "export disabled in config"}
        roles = ("planner", "executor") if self.cfg.split == "both" else (self.cfg.split,)
        kept = [c for c in self.conversations if c.kept and c.role in roles]
        if not kept:
            return {"skipped": "no conversation passed the gates", "exported": 0}
        from agentrag.export.chat import write_chat_export

        counts = {f"{r}_conversations": sum(c.role == r for c in kept) for r in roles}
        return write_chat_export(
            self.run_dir.path / "sft", [c.messages for c in kept], name=f"agentrag_evipath_{self.cfg.split}",
            summary=counts,
            description=(f"EviPath ({self.cfg.mode}) reasoning paths as chat SFT data, split '{self.cfg.split}': "
                         "multi-turn planner conversations (think + Search actions, executor answers as user "
                         "observations) and single-turn executor conversations (question + indexed noisy "
                         "evidence -> think / select / answer). Train on assistant turns only."))

    # --- the whole run ------------------------------------------------------------------------
    def run(self, items: list[EviItem], name: str = "") -> dict[str, Any]:
        start = time.monotonic()
        self.add_items(items)
        wanted = {i.id for i in items}
        self.synthesize_paths(wanted)
        self.select()
        self.gate_and_convert()
        exported = self.export()
        return self.write_report(name or self.run_dir.path.name, exported, time.monotonic() - start, wanted)

    def write_report(self, name: str, exported: dict[str, Any], elapsed: float, wanted: set[str]) -> dict[str, Any]:
        metrics = report_metrics(
            name=name, mode=self.cfg.mode, split=self.cfg.split,
            items=[i for i in self.items if i.id in wanted], plans=self.plans.read(),
            iterations=self.iterations.read(), subs=self.sub_answers.read(), sels=self.selections.read(),
            gates=self.gates.read(), convs=self.conversations.read(), elapsed=elapsed, exported=exported,
            unfinished=self.unfinished)
        self.run_dir.write_json("metrics.json", metrics)
        from agentrag.render import write_report

        write_report(self.run_dir.path, f"EviPath run {name} ({self.cfg.mode})", report_sections(metrics))
        return metrics


__all__ = ["EviPathPipeline", "EviPathComponents"]
