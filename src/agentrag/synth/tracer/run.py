"""``run_tracer``: what ``agentrag synth tracer`` does, as a library call, through the one
synthesizer driver (:func:`agentrag.synth.driver.run_synthesizer`); :class:`TracerSynth` declares
the stages, inputs, components and report, and :class:`TracerRecipe` is the plain-data recipe the
driver and every worker process (the Ray executor) build the components from.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.progress import ProgressArg
from agentrag.records import Passage
from agentrag.runs import RunDir, config_key, records_key
from agentrag.synth.driver import (
    Pipeline,
    Stage,
    Synthesizer,
    SynthRun,
    run_synthesizer,
)
from agentrag.synth.tracer.config import TracerRunConfig
from agentrag.synth.tracer.pipeline import TracerComponents, TracerStages
from agentrag.synth.tracer.verify import STAGES as VERIFY_STAGES

_HOP_GATES = ("link", "atomic filters", "compose", *VERIFY_STAGES)
#: objects (or references) a Python caller may pass to :func:`run_tracer` in place of the config's
GIVEN = ("llm", "judge", "kb", "retriever", "passages", "rebuild")


@dataclass
class TracerRecipe:
    """Plain-data recipe of a run's components: the LLM and judge on the run's cache, the KB loaded
    read-only, the excluded titles. Workers get no passage list (only the driver samples)."""

    llm: str
    judge: str | None
    kb: str
    run_dir: str
    excluded_titles: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: TracerRunConfig, run_dir: str | os.PathLike[str],
                    excluded: Iterable[str] | None = None) -> TracerRecipe:
        """The recipe of ``cfg``; ``excluded``: the excluded titles when already read (default:
        read from ``cfg.exclude``)."""
        if excluded is None:
            from agentrag.synth.tracer.sampling import excluded_titles

            excluded = excluded_titles(cfg.exclude)
        return cls(llm=cfg.llm, judge=cfg.judge, kb=str(cfg.kb), run_dir=str(run_dir),
                   excluded_titles=tuple(sorted(excluded)))

    def __call__(self, kb: Any = None, llms: Mapping[str, Any] | None = None) -> TracerComponents:
        """The components; ``kb`` (a KB or retriever) and ``llms`` (``llm``, ``judge``: objects a
        Python caller passed) replace the references of the recipe."""
        from agentrag.synth.worker import resolve_role_llms
        from agentrag.threads import passive_openmp

        passive_openmp()
        llm: LLM | None = (llms or {}).get("llm")
        judge: LLM | None = (llms or {}).get("judge")
        refs = {role: ref for role, ref, obj in (("llm", self.llm, llm), ("judge", self.judge, judge))
                if obj is None and ref is not None}
        llms = resolve_role_llms(refs, self.run_dir) if refs else {}
        gen = llm if llm is not None else llms["llm"]
        if kb is None:
            from agentrag.kb import KnowledgeBase

            kb = KnowledgeBase.load(self.kb)
        return TracerComponents(llm=gen, judge=judge if judge is not None else llms.get("judge", gen), kb=kb,
                                passages=(), excluded_titles=frozenset(self.excluded_titles), rebuild=self)


@dataclass
class TracerInputs:
    """What the check of the inputs found: the KB (or retriever), its passages, the excluded titles."""

    kb: Retriever
    passages: Sequence[Passage]
    excluded: frozenset[str]


def _passages(kb: Any) -> list[Passage]:
    got = getattr(kb, "passages", None)
    if got is None:
        raise UserError(f"cannot sample documents from {type(kb).__name__}: it has no passages; "
                        "pass passages=[...] with it")
    return list(got() if callable(got) else got)


class TracerSynth(Synthesizer[TracerRunConfig, TracerInputs, TracerComponents]):
    """AgenticRAGTracer declared for the driver (see docs/tracer.md)."""

    name = "tracer"
    given = GIVEN
    recipe = TracerRecipe
    run_files = ("docs.jsonl", "atomic.jsonl")
    key_config = ("preset", "docs", "max_hops", "compose.max_tries")
    viewer = "agentrag.report.viewer.tracer_view:tracer_payload"
    stages = (
        Stage("sample", "KB passages (seeded shuffle, excluded titles and short passages removed)", "docs.jsonl",
              ("annotate: entity type + domain",), "LLM type/domain annotation of the candidates", "documents"),
        Stage("select", "annotated documents", "selected documents", ("max_per_type",)),
        Stage("atomic", "selected documents", "atomic.jsonl", ("generate: parseable pairs",)),
        Stage("pairs", "atomic pairs", "accepted pairs (chain seeds)",
              ("malformed", "numeric_answer", "parametric", "grounded"), unit="atomic pairs"),
        *(s for level in (2, 3, 4) for s in (
            Stage(f"hop{level}", f"chains of {level - 1} hops", f"hop{level}.jsonl", _HOP_GATES,
                  "extend + three-stage verification", "chains"),
            Stage(f"hop{level}.candidates", "candidate documents", f"verified hops ({level} hops)", _HOP_GATES,
                  unit="candidate documents"))),
        Stage("export", "verified chain levels (2..4 hops)", "benchmark.jsonl", ("every hop verified",),
              unit="verified chain levels"),
    )

    def check_inputs(self, cfg: TracerRunConfig, out: str | os.PathLike[str],
                     given: Mapping[str, Any]) -> TracerInputs:
        from agentrag.llm.resolve import check_llm_ref
        from agentrag.synth.tracer.sampling import excluded_titles

        kb = given.get("kb", given.get("retriever"))
        if kb is None and not cfg.kb:
            raise UserError("no knowledge base: pass --kb DIR (build one with `agentrag kb build`)")
        for role in ("llm", "judge"):
            ref = given.get(role, getattr(cfg, role))
            if isinstance(ref, str):
                check_llm_ref(ref)
        excluded = frozenset(excluded_titles(cfg.exclude))  # bad files fail before anything is written
        if kb is None:
            from agentrag.kb import KnowledgeBase

            kb = KnowledgeBase.load(str(cfg.kb))
        passages = given.get("passages")
        return TracerInputs(kb=kb, passages=list(passages) if passages is not None else _passages(kb),
                            excluded=excluded)

    def components(self, cfg: TracerRunConfig, run: RunDir, inputs: TracerInputs,
                   given: Mapping[str, Any]) -> TracerComponents:
        refs = {k: v for k, v in given.items() if k in ("llm", "judge") and isinstance(v, str)}
        objs = {k: v for k, v in given.items() if k in ("llm", "judge") and not isinstance(v, str)}
        recipe = TracerRecipe.from_config(cfg, run.path, inputs.excluded)
        recipe = replace(recipe, llm=refs.get("llm", recipe.llm), judge=refs.get("judge", recipe.judge))
        if "judge" not in given and cfg.judge is None and "llm" in objs:
            objs["judge"] = objs["llm"]  # the judge defaults to the generator
        comps = recipe(kb=inputs.kb, llms=objs)
        comps.passages = inputs.passages
        # objects given by a caller cannot be rebuilt from the config in a worker: their recipe (if any)
        comps.rebuild = given.get("rebuild") if objs or "kb" in given or "retriever" in given else recipe
        return comps

    def llm_roles(self, comps: TracerComponents) -> dict[str, Any]:
        return {"llm": comps.llm, "judge": comps.judge}

    def finished_key(self, cfg: TracerRunConfig, inputs: TracerInputs) -> str:
        return config_key(cfg, records_key(inputs.passages), json.dumps(sorted(inputs.excluded), ensure_ascii=False))

    def pipeline(self, ctx: SynthRun, cfg: TracerRunConfig, comps: TracerComponents,
                 inputs: TracerInputs) -> Pipeline:
        return TracerStages(ctx, cfg, comps).pipeline()

    def title(self, cfg: TracerRunConfig, name: str) -> str:
        return f"AgenticRAGTracer build {name}"

    def report_sections(self, metrics: dict[str, Any]) -> Sequence[Any]:
        from agentrag.synth.tracer.report import report_sections

        return report_sections(metrics)


def run_tracer(cfg: TracerRunConfig, out: str | os.PathLike[str], *, progress: ProgressArg = None,
               executor: Executor | None = None, **given: Any) -> dict[str, Any]:
    """Build the benchmark into the run directory ``out`` (rerun = resume); returns ``metrics.json``.

    ``given`` may hold objects that replace the config's references: ``llm``, ``judge`` (LLM
    objects or references), ``kb`` / ``retriever`` (a KnowledgeBase or any Retriever),
    ``passages`` (what to sample from; default the KB's passages) and ``rebuild`` (a picklable
    recipe of such components, for the Ray executor). Items hit by an outage stay unfinished
    (``metrics["unfinished"]``); a 401/404 raises :class:`~agentrag.errors.EndpointError`; items
    that hit a bug raise :class:`~agentrag.synth.driver.SynthBugs` after the metrics are written.
    """
    return run_synthesizer(TracerSynth(), cfg, out, progress=progress, executor=executor, **given)


__all__ = ["run_tracer", "TracerSynth", "TracerRecipe", "TracerInputs"]
