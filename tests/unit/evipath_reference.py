"""The EviPath pipeline as it was before the stages read their records by offset (issue 27, part 3:
peak memory): kept as the reference the streaming pipeline must match byte for byte
(tests/unit/test_evipath_streaming.py). Not used by the package."""

# ruff: noqa
from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

from agentrag.eval.metrics import f1
from agentrag.exec import StageResult
from agentrag.runs import config_key, records_key
from agentrag.synth.driver import Pipeline, SynthOutput, SynthRun, ids_key
from agentrag.synth.evipath.config import EviPathConfig, EviPathRunConfig
from agentrag.synth.evipath.conversations import executor_messages, planner_messages
from agentrag.synth.evipath.answering import synthesize_selection
from agentrag.synth.evipath.gates import check_path
from agentrag.synth.evipath.inputs import read_items
from agentrag.synth.evipath.pipeline import EviPathComponents
from agentrag.synth.evipath.planning import explore, failed_plan_path, make_plan
from agentrag.synth.evipath.report import statistics
from agentrag.synth.evipath.run import EviPathSynth
from agentrag.synth.evipath.schema import (
    ConversationRecord,
    EviItem,
    GateRecord,
    IterationRecord,
    PlanRecord,
    SelectionRecord,
    SubAnswerRecord,
)
from agentrag.synth.evipath.support import synthesis_wording
from agentrag.synth.worker import ComponentsTask

PathOut = tuple[PlanRecord, list[IterationRecord], list[SubAnswerRecord], list[SelectionRecord]]

_NONE = StageResult()

PathOut = tuple[PlanRecord, list[IterationRecord], list[SubAnswerRecord], list[SelectionRecord]]


def _abductive_path(cfg: EviPathConfig, c: EviPathComponents, task: tuple[EviItem, PlanRecord | None]) -> PathOut:
    item, plan = task
    plan = plan or make_plan(c.planner, item, cfg)
    if plan.status != "ok":  # a flagged plan (unparseable, over the context window): the item ends here
        return plan, failed_plan_path(item, plan), [], []
    iterations, subs = explore(c.planner, c.executor, item, plan, cfg)
    return plan, iterations, subs, []


def _deductive_path(cfg: EviPathConfig, c: EviPathComponents, task: tuple[EviItem, PlanRecord | None]) -> PathOut:
    from agentrag.synth.evipath.deductive import agent_path

    if c.retriever is None:
        from agentrag.errors import UserError

        raise UserError("--mode deductive needs a knowledge base: pass --kb DIR")
    return agent_path(cfg, c.planner, c.executor, c.retriever, c.phi, task[0])


def _select_one(cfg: EviPathConfig, c: EviPathComponents, task: tuple[SubAnswerRecord, EviItem]) -> SelectionRecord:
    sub, item = task
    return synthesize_selection(c.executor, c.phi(), item, sub.id, sub.question, sub.answer, cfg.executor, cfg.seed)


class OldEviPathStages:
    """The stages over one run directory, driven by :class:`~agentrag.synth.evipath.run.EviPathSynth`."""

    def __init__(self, ctx: SynthRun, cfg: EviPathConfig, comps: EviPathComponents) -> None:
        self.ctx, self.cfg, self.c = ctx, cfg, comps
        run = ctx.run
        self.items = run.stage_file("items", EviItem)
        self.plans = run.stage_file("plans", PlanRecord)
        self.iterations = run.stage_file("iterations", IterationRecord)
        self.sub_answers = run.stage_file("sub_answers", SubAnswerRecord)
        self.selections = run.stage_file("selections", SelectionRecord)
        self.gates = run.stage_file("gates", GateRecord)
        self.conversations = run.stage_file("conversations", ConversationRecord)

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

    def _good(self, item: EviItem, iterations: list[IterationRecord]) -> bool:
        """Whether a finished path reached an answer good enough for the final-answer gate (its
        sub-answers get selections; the others are rejected anyway, no calls spent)."""
        last = iterations[-1]
        return last.status == "ok" and last.answer is not None and \
            f1(last.answer, item.answers) > self.cfg.gates.f1_threshold

    def synthesize_paths(self, wanted: set[str]) -> None:
        """Plans (Eq. 3) and iterations with sub-answers (Eq. 4–6) of the pending items; in the
        abductive mode an item's Eq. 6 selections start as soon as its own path is written (they
        need only that path), overlapping the other items' paths (:meth:`SynthRun.flow`)."""
        done = self.finished_paths()
        plans = {p.id: p for p in self.plans}
        todo = [(i, plans.get(i.id)) for i in self.items if i.status == "ok" and i.id in wanted and i.id not in done]
        fn = self._task(_deductive_path if self.cfg.mode == "deductive" else _abductive_path)
        abductive = self.cfg.mode != "deductive"

        def write(task: tuple[EviItem, PlanRecord | None], out: PathOut) -> list[tuple[str, Any]]:
            plan, iterations, subs, sels = out
            self.plans.append(plan)
            for r in subs:
                self.sub_answers.append(r)
            for s in sels:
                self.selections.append(s)
            for it in iterations:  # the `last` record goes last: it marks the item done
                self.iterations.append(it)
            if not abductive or not iterations or not iterations[-1].last or not self._good(task[0], iterations):
                return []
            return [("selections", (s, task[0])) for s in subs if s.status == "ok" and s.id not in self.selections]

        def write_selection(_sub: Any, rec: SelectionRecord) -> None:
            self.selections.append(rec)

        self.ctx.flow({"paths": (fn, write), "selections": (self._task(_select_one), write_selection)},
                      [("paths", t) for t in todo])

    def select(self) -> None:
        """Eq. 6 selections + executor thoughts for the sub-answers of paths that reached an answer
        good enough for the final-answer gate and have none yet (a path of an earlier run, or a
        selection an outage left unfinished; those of this run's paths ran in :meth:`synthesize_paths`)."""
        if self.cfg.mode == "deductive":
            return
        items = {i.id: i for i in self.items}
        paths = self.finished_paths()
        good = {k for k, v in paths.items() if self._good(items[k], v)}
        todo = [(s, items[s.item_id]) for s in self.sub_answers
                if s.item_id in good and s.status == "ok" and s.id not in self.selections]
        failed = self.ctx.results.get("selections", _NONE)  # left unfinished by this run's flow: not retried
        fresh = [t for t in todo if t[0].id not in failed.unfinished and t[0].id not in failed.bugs]

        def write(_sub: Any, rec: SelectionRecord) -> None:
            self.selections.append(rec)

        self.ctx.stage("selections", self._task(_select_one), fresh, write)

    def gate_and_convert(self) -> None:
        """The gates and the Eq. 7 conversations of every finished path not gated yet."""
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

    def export_roles(self) -> tuple[str, ...]:
        return ("planner", "executor") if self.cfg.split == "both" else (self.cfg.split,)

    def export(self) -> dict[str, Any]:
        """The SFT export of every kept conversation of the exported roles (all items of the run):
        ``sft/`` holds the split (both roles mixed, Eq. 7, for ``both``) and ``sft_planner/``,
        ``sft_executor/`` each role alone, with its own ``dataset_info.json`` entry. A conversation
        whose assistant turns use synthesis-only wording is not exported (counted)."""
        if not self.cfg.export:
            return {"skipped": "export disabled in config"}
        roles = self.export_roles()
        kept, dropped = [], 0
        for c in self.conversations:
            if c.kept and c.role in roles:
                if any(m.role == "assistant" and synthesis_wording(m.content or "") for m in c.messages):
                    dropped += 1
                else:
                    kept.append(c)
        if not kept:
            return {"skipped": "no conversation passed the gates", "exported": 0, "synthesis_wording": dropped}
        from agentrag.export.chat import write_chat_export

        counts = {f"{r}_conversations": sum(c.role == r for c in kept) for r in roles}
        about = {"planner": "multi-turn planner conversations (think + Search actions, executor answers as user "
                            "observations)",
                 "executor": "single-turn executor conversations (question + indexed noisy evidence -> think / "
                             "select / answer)"}
        out = self.ctx.run.path
        info = write_chat_export(
            out / "sft", [c.messages for c in kept], name=f"agentrag_evipath_{self.cfg.split}",
            summary={**counts, "synthesis_wording": dropped},
            description=(f"EviPath ({self.cfg.mode}) reasoning paths as chat SFT data, split '{self.cfg.split}': "
                         + " and ".join(about[r] for r in roles) + ". Train on assistant turns only."))
        info["roles"] = {}
        for r in roles:
            chats = [c.messages for c in kept if c.role == r]
            if chats:
                sub = write_chat_export(out / f"sft_{r}", chats, name=f"agentrag_evipath_{r}",
                                        description=f"EviPath ({self.cfg.mode}) {about[r]}. Train on assistant "
                                                    "turns only.")
                info["roles"][r] = {"dir": str(out / f"sft_{r}"), "exported": sub["exported"]}
        return info

    def run(self, items: list[EviItem], *, export: bool = True) -> tuple[set[str], dict[str, Any]]:
        """Every stage over the pending items; returns the wanted item ids and the export summary
        (``export=False``: no export, an empty summary; the caller exports)."""
        self.add_items(items)
        wanted = {i.id for i in items}
        self.synthesize_paths(wanted)
        self.select()
        self.gate_and_convert()
        return wanted, self.export() if export else {}


class OldInputs:
    def __init__(self, items: list[EviItem], kb: Any = None) -> None:
        self.items, self.kb = items, kb


class OldEviPathSynth(EviPathSynth):
    """EviPath with the list-based inputs, stages and export of before."""

    def check_inputs(self, cfg: EviPathRunConfig, out: str | os.PathLike[str], given: Any) -> Any:
        new = super().check_inputs(cfg, out, given)
        items = [it for path in cfg.datasets for it in read_items(path, skip_invalid=cfg.skip_invalid, limit=cfg.limit)]
        return OldInputs(items, new.kb)

    def finished_key(self, cfg: EviPathRunConfig, inputs: Any) -> str:
        return config_key(cfg, records_key(inputs.items))

    def pipeline(self, ctx: SynthRun, cfg: EviPathRunConfig, comps: EviPathComponents, inputs: Any) -> Pipeline:
        stages = OldEviPathStages(ctx, cfg, comps)
        wanted: set[str] = set()

        def steps() -> None:
            wanted.update(stages.run(inputs.items, export=False)[0])

        def report() -> SynthOutput:
            exported = stages.export()
            counts, details = statistics(
                mode=cfg.mode, split=cfg.split, items=[i for i in stages.items if i.id in wanted],
                plans=stages.plans, iterations=stages.iterations, subs=stages.sub_answers,
                sels=stages.selections, gates=stages.gates, convs=stages.conversations,
                exported=exported, export_roles=stages.export_roles())
            return SynthOutput(counts=counts, export=exported, details=details)
        # the stage files' final form (input order, timings apart) is the driver's, the same for both
        return Pipeline(steps=[steps], report=report, report_key=lambda: ids_key(wanted),
                        order=lambda: [i.id for i in inputs.items])
