"""EviPath as a :class:`~agentrag.synth.driver.Synthesizer` declaration, and ``run_evipath``:
what ``agentrag synth evipath`` does, as a library call (the CLI only parses arguments and prints).

``run_evipath(cfg, out, planner=..., executor_llm=..., retriever=..., embedder=...)`` takes LLM,
retriever and embedder objects in place of the config's references (``llm`` is another name of
``planner``); ``rebuild`` is the recipe Ray workers build the components from when objects are
given (without one, a distributed executor refuses to run).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor
from agentrag.kb.base import Embedder
from agentrag.paths import check_out_dir
from agentrag.progress import ProgressArg
from agentrag.runs import RunDir, config_key, records_key
from agentrag.synth.driver import (
    Pipeline,
    Stage,
    Synthesizer,
    SynthOutput,
    SynthRun,
    run_synthesizer,
)
from agentrag.synth.evipath.config import EviPathRunConfig
from agentrag.synth.evipath.gates import GATES
from agentrag.synth.evipath.inputs import iter_items
from agentrag.synth.evipath.pipeline import EviPathComponents, EviPathStages
from agentrag.synth.evipath.report import sections, statistics
from agentrag.synth.evipath.schema import EviItem
from agentrag.threads import passive_openmp

#: objects a Python caller may pass to ``run_evipath`` in place of the config's references
GIVEN = ("planner", "llm", "executor_llm", "retriever", "embedder", "rebuild")


def _embedder_factory(embedder: str | None, kb: Any) -> Any:
    def build() -> Embedder:
        if embedder:
            from agentrag.kb.embedders import load_embedder

            return load_embedder(embedder)
        if kb is not None and hasattr(kb, "embedder"):
            return kb.embedder  # type: ignore[no-any-return]
        from agentrag.kb.embedders import load_embedder

        return load_embedder()

    return build


@dataclass
class EviPathRecipe:
    """Plain-data recipe of a run's components, rebuilt in worker processes (the Ray executor) and
    used by the driver itself: the planner and executor LLMs on the run's cache, the KB loaded
    read-only (or its server), φ."""

    llm: str
    executor_llm: str | None
    kb: str | None
    embedder: str | None
    run_dir: str

    @classmethod
    def from_config(cls, cfg: EviPathRunConfig, run_dir: str | os.PathLike[str]) -> EviPathRecipe:
        return cls(llm=cfg.llm, executor_llm=cfg.executor_llm, kb=cfg.kb, embedder=cfg.executor.embedder,
                   run_dir=str(run_dir))

    def __call__(self, kb: Any = None, llms: Mapping[str, Any] | None = None) -> EviPathComponents:
        passive_openmp()
        from agentrag.synth.worker import resolve_role_llms

        if kb is None and self.kb:
            from agentrag.kb import resolve_retriever

            kb = resolve_retriever(self.kb)
        refs = {"planner": self.llm, "executor": self.executor_llm or self.llm}
        built = resolve_role_llms({k: v for k, v in refs.items() if k not in (llms or {})}, self.run_dir)
        llms = {**built, **(llms or {})}
        return EviPathComponents(planner=llms["planner"], executor=llms["executor"],
                                 embedder=_embedder_factory(self.embedder, kb), retriever=kb, rebuild=self)


@dataclass
class EviInputs:
    """What :meth:`EviPathSynth.check_inputs` found: the datasets (read again, one item at a time,
    by :meth:`items`: no run holds its input items), the ids of their items, the key of their
    contents (:func:`~agentrag.runs.records_key`) and the KB (or None)."""

    datasets: list[str]
    skip_invalid: bool = False
    limit: int | None = None
    ids: list[str] = field(default_factory=list)
    key: str = ""
    kb: Any = None

    def items(self) -> Iterator[EviItem]:
        for path in self.datasets:
            yield from iter_items(path, skip_invalid=self.skip_invalid, limit=self.limit)

    def scan(self) -> EviInputs:
        """Read the datasets once (every input error raises here): the ids and the key."""
        def each() -> Iterator[EviItem]:
            for it in self.items():
                self.ids.append(it.id)
                yield it
        self.ids.clear()
        self.key = records_key(each())
        return self


class EviPathSynth(Synthesizer[EviPathRunConfig, EviInputs, EviPathComponents]):
    """EviPath (paper 001): abductive reasoning paths -> planner and executor SFT conversations."""

    name = "evipath"
    given = GIVEN
    recipe = EviPathRecipe
    run_files = ("items.jsonl", "plans.jsonl")
    key_config = ("mode", "split", "limit", "planner.max_iterations", "gates.eq6_floor")
    viewer = "agentrag.report.viewer.evipath_view:evipath_payload"
    stages = (
        Stage("items", "raw HotpotQA / 2Wiki / MuSiQue files", "items.jsonl", ("gold_evidence",), "d_train",
              "items"),
        Stage("plans", "items.jsonl", "plans.jsonl", ("parse",), "Eq. 3"),
        Stage("paths", "plans.jsonl", "iterations.jsonl", ("parse", "max_iterations"), "Eq. 4-5"),
        Stage("sub_answers", "iterations.jsonl", "sub_answers.jsonl", ("non_empty",), "Eq. 6 f_QA", "sub-questions"),
        Stage("selections", "sub_answers.jsonl", "selections.jsonl", ("parse",), "Eq. 6 + executor thought",
              "sub-questions"),
        Stage("gates", "iterations.jsonl + selections.jsonl", "gates.jsonl",
              GATES,
              "ours; first failed gate", "items"),
        Stage("conversations", "gates.jsonl", "conversations.jsonl", ("gates_passed",), "Eq. 7 kept",
              "conversations"),
        Stage("export", "conversations.jsonl", "sft/", ("split",), "SFT export", "conversations"),
    )

    def check_inputs(self, cfg: EviPathRunConfig, out: str | os.PathLike[str],
                     given: Mapping[str, Any]) -> EviInputs:
        from agentrag.llm.resolve import check_llm_ref

        if not cfg.datasets:
            raise UserError("no dataset: pass --dataset FILE (raw HotpotQA, 2WikiMultihopQA or MuSiQue)")
        if cfg.mode == "deductive" and not (cfg.kb or given.get("retriever")):
            raise UserError("--mode deductive runs the planner_executor agent on a knowledge base: pass --kb DIR")
        check_out_dir(out)
        planner_given = given.get("planner") or given.get("llm")
        refs = [] if planner_given else [cfg.llm]
        if not given.get("executor_llm") and (cfg.executor_llm or not planner_given):
            refs.append(cfg.executor_llm or cfg.llm)
        for ref in dict.fromkeys(refs):
            check_llm_ref(ref)
        inputs = EviInputs([str(p) for p in cfg.datasets], cfg.skip_invalid, cfg.limit).scan()
        kb = given.get("retriever")
        if kb is None and cfg.kb:
            from agentrag.kb import resolve_retriever

            kb = resolve_retriever(cfg.kb)
        inputs.kb = kb
        return inputs

    def components(self, cfg: EviPathRunConfig, run: RunDir, inputs: EviInputs,
                   given: Mapping[str, Any]) -> EviPathComponents:
        recipe = EviPathRecipe.from_config(cfg, run.path)
        planner = given.get("planner") or given.get("llm")
        llms = {"planner": planner} if planner is not None else {}
        if given.get("executor_llm") is not None:
            llms["executor"] = given["executor_llm"]
        elif planner is not None and not cfg.executor_llm:
            llms["executor"] = planner
        comps = recipe(kb=inputs.kb, llms=llms)
        if given.get("embedder") is not None:
            comps.embedder = given["embedder"]
        objects = any(given.get(k) is not None for k in GIVEN if k != "rebuild")
        comps.rebuild = given.get("rebuild") or (None if objects else recipe)
        return comps

    def llm_roles(self, comps: EviPathComponents) -> dict[str, Any]:
        return {"planner": comps.planner, "executor": comps.executor}

    def finished_key(self, cfg: EviPathRunConfig, inputs: EviInputs) -> str:
        return config_key(cfg, inputs.key)

    def pipeline(self, ctx: SynthRun, cfg: EviPathRunConfig, comps: EviPathComponents,
                 inputs: EviInputs) -> Pipeline:
        stages = EviPathStages(ctx, cfg, comps)

        def report(wanted: set[str]) -> SynthOutput:
            exported = stages.export()
            counts, details = statistics(  # every argument a stream over a stage file
                mode=cfg.mode, split=cfg.split, items=(i for i in stages.items if i.id in wanted),
                plans=stages.plans, iterations=stages.iterations, subs=stages.sub_answers,  # streamed
                sels=stages.selections, gates=stages.gates, convs=stages.conversations,
                exported=exported, export_roles=stages.export_roles())
            return SynthOutput(counts=counts, export=exported, details=details)
        return stages.pipeline(inputs.items(), report)

    def concurrency(self, cfg: EviPathRunConfig) -> int:
        return cfg.items_in_flight()

    def title(self, cfg: EviPathRunConfig, name: str) -> str:
        return f"EviPath run {name} ({cfg.mode})"

    def report_sections(self, metrics: dict[str, Any]) -> Sequence[Any]:
        return sections(metrics, {s.name: s.about for s in self.stages})


def run_evipath(cfg: EviPathRunConfig, out: str | os.PathLike[str], *, progress: ProgressArg = None,
                executor: Executor | None = None, **given: Any) -> dict[str, Any]:
    """Read the datasets, synthesize, gate, export and report into the run directory ``out``
    (rerun = resume). ``given``: LLM/retriever/embedder objects in place of the references
    (module docstring). Returns ``metrics.json``'s object; items hit by an outage are counted in
    ``metrics["unfinished"]``; raises :class:`~agentrag.synth.driver.SynthBugs` after writing the
    metrics when items hit a bug, and :class:`~agentrag.errors.EndpointError` (nothing finished
    written) on a 401/404."""
    return run_synthesizer(EviPathSynth(), cfg, out, progress=progress, executor=executor, **given)


__all__ = ["run_evipath", "EviPathSynth", "EviPathRecipe", "EviInputs", "GIVEN"]
