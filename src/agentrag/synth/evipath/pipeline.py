"""EviPath stages over a run directory: items -> plans (Eq. 3) -> iterations + sub-answers
(Eq. 4–6) -> selections (Eq. 6) -> gates -> conversations (Eq. 7) -> SFT export.

Every stage is an append-only JSONL of the run directory keyed by stable ids; per-item work runs
through the driver's ``SynthRun.stage`` (the failure policy of :mod:`agentrag.exec.policy`: the
function returns records, the driver writes them). Rerunning resumes: an item whose path has its
``last`` iteration record is done, sub-answers with a selection are skipped, and with the run's
LLM cache no call is paid twice. An outage or a lost worker leaves the item unfinished (nothing
written for it); a 401/404 stops the run; model output that cannot be parsed, or a request over
the context window, is a flagged record. The per-item functions are module-level and take plain
data, so on the Ray executor they run in worker processes that rebuild the components with
``EviPathComponents.rebuild`` (see :mod:`agentrag.synth.worker`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from agentrag.eval.metrics import f1
from agentrag.kb.base import Embedder, Retriever
from agentrag.llm.base import LLM
from agentrag.synth.driver import PendingStage, Pipeline, PipelineStep, SynthOutput, SynthRun, ids_key
from agentrag.synth.evipath.answering import synthesize_selection
from agentrag.synth.evipath.config import EviPathConfig
from agentrag.synth.evipath.conversations import executor_messages, planner_messages
from agentrag.synth.evipath.export import export_sft
from agentrag.synth.evipath.gates import check_path
from agentrag.synth.evipath.planning import explore, failed_plan_path, make_plan
from agentrag.synth.evipath.schema import (
    ConversationRecord,
    EviItem,
    GateRecord,
    IterationRecord,
    PlanRecord,
    SelectionRecord,
    SubAnswerRecord,
)
from agentrag.synth.lazy import Ref, StageGroups, StageIndex
from agentrag.synth.worker import ComponentsTask

PathOut = tuple[PlanRecord, list[IterationRecord], list[SubAnswerRecord], list[SelectionRecord]]


@dataclass
class EviPathComponents:
    """What a run talks to: the planner and executor LLMs (the same object for one LLM), φ of Eq. 6
    (``embedder``, built on first use when a factory is given) and the KB (the deductive mode's agent searches it;
    the abductive executor's training context is filled from it)."""

    planner: LLM
    executor: LLM
    embedder: Embedder | Callable[[], Embedder]
    retriever: Retriever | None = None
    rebuild: Callable[[], EviPathComponents] | None = None  # the recipe a worker process builds them from
    _phi: Embedder | None = field(default=None, repr=False)

    def verifier(self, cfg: EviPathConfig) -> LLM | None:
        """The gates' verifier LLM (``gates.verifier``): the planner's, the executor's, or none."""
        return {"planner": self.planner, "executor": self.executor}.get(cfg.gates.verifier)

    def phi(self) -> Embedder:
        if self._phi is None:
            emb = self.embedder
            self._phi = emb if isinstance(emb, Embedder) else emb()
        return self._phi


def _abductive_path(cfg: EviPathConfig, items: StageIndex[EviItem], c: EviPathComponents,
                    task: tuple[Ref, PlanRecord | None]) -> PathOut:
    item, plan = items[task[0].id], task[1]
    plan = plan or make_plan(c.planner, item, cfg)
    if plan.status != "ok":  # a flagged plan (unparseable, over the context window): the item ends here
        return plan, failed_plan_path(item, plan), [], []
    iterations, subs = explore(c.planner, c.executor, item, plan, cfg)
    return plan, iterations, subs, []


def _deductive_path(cfg: EviPathConfig, items: StageIndex[EviItem], c: EviPathComponents,
                    task: tuple[Ref, PlanRecord | None]) -> PathOut:
    from agentrag.synth.evipath.deductive import agent_path

    if c.retriever is None:
        from agentrag.errors import UserError

        raise UserError("--mode deductive needs a knowledge base: pass --kb DIR")
    return agent_path(cfg, c.planner, c.executor, c.retriever, c.phi, items[task[0].id])


def _select_one(cfg: EviPathConfig, items: StageIndex[EviItem], c: EviPathComponents,
                task: tuple[SubAnswerRecord, Ref]) -> SelectionRecord:
    sub, item = task[0], items[task[1].id]
    return synthesize_selection(c.executor, c.phi(), item, sub.id, sub.question, sub.answer, cfg.executor, cfg.seed,
                                c.retriever)


@dataclass(frozen=True)
class GateInputs:
    """Where the gate of one item reads its records (byte offsets into the stage files: picklable)."""

    items: StageIndex[EviItem]
    plans: StageIndex[PlanRecord]
    paths: StageGroups[IterationRecord]
    subs: StageGroups[SubAnswerRecord]
    sels: StageIndex[SelectionRecord]


GateOut = tuple[GateRecord, list[ConversationRecord]]


def _gate_one(cfg: EviPathConfig, got: GateInputs, c: EviPathComponents, task: tuple[Ref]) -> GateOut:
    """The gates of one finished path (the verifier may call an LLM) and its Eq. 7 conversations."""
    item_id = task[0].id
    item, plan = got.items[item_id], got.plans[item_id]
    iterations = sorted(got.paths[item_id], key=lambda r: r.n)
    item_sels = [got.sels[s.id] for s in got.subs[item_id] if s.id in got.sels]
    gate = check_path(item, plan, iterations, item_sels, cfg.gates, c.verifier(cfg))
    convs = [ConversationRecord(id=f"{item_id}-planner", item_id=item_id, role="planner", kept=gate.passed,
                                messages=planner_messages(item, plan, iterations))]
    convs += [ConversationRecord(id=f"{sel.id}-executor", item_id=item_id, role="executor",
                                 kept=gate.passed and sel.id in gate.executor_kept, messages=executor_messages(sel))
              for sel in item_sels if sel.select is not None]
    return gate, convs


class EviPathStages:
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
        self._items: StageIndex[EviItem] | None = None

    def add_items(self, items: Iterable[EviItem]) -> list[str]:
        """Append the input items (streamed) that are new; returns the ids of all of them, in input order."""
        ids: list[str] = []
        for it in items:
            ids.append(it.id)
            self.items.append(it)
        return ids

    def item_index(self) -> StageIndex[EviItem]:
        """Byte offsets of every item of ``items.jsonl``: an item is read when a task needs it."""
        if self._items is None or len(self._items) != len(self.items):
            self._items = StageIndex(self.items.path, EviItem)
        return self._items

    def paths(self) -> StageGroups[IterationRecord]:
        """The iteration records per item (offsets); ``.marked``: the items whose path is finished."""
        return StageGroups(self.iterations.path, IterationRecord, "item_id", mark="last")

    def finished_paths(self) -> Iterator[tuple[str, list[IterationRecord]]]:
        """``(item id, its iterations by n)`` of every finished path, read one item at a time (in
        the order of the items' first iteration record)."""
        groups = self.paths()
        for item_id in groups:
            if item_id in groups.marked:
                yield item_id, sorted(groups[item_id], key=lambda r: r.n)

    def _task(self, fn: Callable[..., Any]) -> ComponentsTask:
        return ComponentsTask(partial(fn, self.cfg, self.item_index()), self.c, self.c.rebuild,
                              what="EviPath components")

    def _good(self, item: EviItem, iterations: list[IterationRecord]) -> bool:
        """Whether a finished path reached an answer good enough for the final-answer gate (its
        sub-answers get selections; the others are rejected anyway, no calls spent)."""
        last = iterations[-1]
        return last.status == "ok" and last.answer is not None and \
            f1(last.answer, item.answers) > self.cfg.gates.f1_threshold

    def synthesize_paths(self, wanted: set[str]) -> None:
        """Plans (Eq. 3) and iterations with sub-answers (Eq. 4–6) of the pending items; in the
        abductive mode an item's Eq. 6 selections start as soon as its own path is written (they
        need only that path), overlapping the other items' paths (:meth:`SynthRun.flow`). The
        work list holds ids (and the plans of resumed items); a task reads its item by offset."""
        done = self.paths().marked
        pending = [i.id for i in self.items if i.status == "ok" and i.id in wanted and i.id not in done]
        plans = StageIndex(self.plans.path, PlanRecord, set(pending))
        todo = [(Ref(k), plans.get(k)) for k in pending]
        fn = self._task(_deductive_path if self.cfg.mode == "deductive" else _abductive_path)
        abductive = self.cfg.mode != "deductive"
        index = self.item_index()

        def write(task: tuple[Ref, PlanRecord | None], out: PathOut) -> list[tuple[str, Any]]:
            plan, iterations, subs, sels = out
            self.plans.append(plan)
            for r in subs:
                self.sub_answers.append(r)
            for s in sels:
                self.selections.append(s)
            for it in iterations:  # the `last` record goes last: it marks the item done
                self.iterations.append(it)
            if not abductive or not iterations or not iterations[-1].last or \
                    not self._good(index[task[0].id], iterations):
                return []
            return [("selections", (s, task[0])) for s in subs if s.status == "ok" and s.id not in self.selections]

        def write_selection(_sub: Any, rec: SelectionRecord) -> None:
            self.selections.append(rec)

        self.ctx.flow({"paths": (fn, write), "selections": (self._task(_select_one), write_selection)},
                      [("paths", t) for t in todo])

    def selections_catch_up(self) -> PendingStage[tuple[SubAnswerRecord, Ref], SelectionRecord]:
        """Eq. 6 selections + executor thoughts for the sub-answers of paths that reached an answer
        good enough for the final-answer gate and have none yet (a path of an earlier run, or a
        selection an outage left unfinished; those of this run's paths ran in :meth:`synthesize_paths`)."""

        def pending() -> list[tuple[SubAnswerRecord, Ref]]:
            index = self.item_index()
            good = {k for k, its in self.finished_paths() if self._good(index[k], its)}
            return [(s, Ref(s.item_id)) for s in self.sub_answers
                    if s.item_id in good and s.status == "ok" and s.id not in self.selections]

        def write(_sub: Any, rec: SelectionRecord) -> None:
            self.selections.append(rec)

        return PendingStage("selections", self._task(_select_one), pending, write, key=lambda t: t[0].id)

    def gate_and_convert(self) -> None:
        """The gates and the Eq. 7 conversations of every finished path not gated yet, under the
        failure policy (the verifier is an LLM: an outage leaves the item ungated, gated on rerun);
        the work list holds ids, a task reads its item, plan, path, sub-answers and selections by offset."""
        index = self.item_index()
        got = GateInputs(index, StageIndex(self.plans.path, PlanRecord), self.paths(),
                         StageGroups(self.sub_answers.path, SubAnswerRecord, "item_id"),
                         StageIndex(self.selections.path, SelectionRecord))
        todo: list[tuple[Ref]] = []
        for item_id, iterations in self.finished_paths():
            if item_id in self.gates or item_id not in got.plans:
                continue
            item_subs = got.subs[item_id]
            n_sels = sum(s.id in got.sels for s in item_subs)
            expected = [s for s in item_subs if s.status == "ok"]
            if self.cfg.mode == "abductive" and iterations[-1].status == "ok" and n_sels < len(expected):
                if f1(iterations[-1].answer, index[item_id].answers) > self.cfg.gates.f1_threshold:
                    continue  # selections unfinished (outage): gate on rerun
            todo.append((Ref(item_id),))

        def write(_task: tuple[Ref], out: GateOut) -> None:
            gate, convs = out
            for conv in convs:
                self.conversations.append(conv)
            self.gates.append(gate)  # last: marks the item gated

        self.ctx.stage("gates", ComponentsTask(partial(_gate_one, self.cfg, got), self.c, self.c.rebuild,
                                               what="EviPath components"), todo, write)

    def export_roles(self) -> tuple[str, ...]:
        return ("planner", "executor") if self.cfg.split == "both" else (self.cfg.split,)

    def export(self) -> dict[str, Any]:
        """The SFT export of every kept conversation of the exported roles (all items of the run),
        streamed over ``conversations.jsonl`` (:func:`~agentrag.synth.evipath.export.export_sft`)."""
        if not self.cfg.export:
            return {"skipped": "export disabled in config"}
        return export_sft(self.conversations, self.ctx.run.path, mode=self.cfg.mode, split=self.cfg.split,
                          roles=self.export_roles())

    def pipeline(self, items: Iterable[EviItem], report: Callable[[set[str]], SynthOutput]) -> Pipeline:
        """Every stage over the pending items (``items``: a stream, none is held): plans and paths
        with their selections, the selections' catch-up (abductive mode), the gates and
        conversations; then ``report(wanted item ids)``, reused on a rerun that changed no file."""
        wanted: set[str] = set()
        order: list[str] = []  # the item ids in input order

        def paths() -> None:
            order.extend(self.add_items(items))
            wanted.update(order)
            self.synthesize_paths(wanted)

        steps: list[PipelineStep] = [paths]
        if self.cfg.mode != "deductive":
            steps.append(self.selections_catch_up())
        steps.append(self.gate_and_convert)
        return Pipeline(steps=steps, report=lambda: report(wanted), report_key=lambda: ids_key(wanted),
                        order=lambda: order)


__all__ = ["EviPathStages", "EviPathComponents"]
