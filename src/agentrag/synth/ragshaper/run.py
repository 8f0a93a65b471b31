"""RAGShaper declared for the synthesizer driver (:mod:`agentrag.synth.driver`), and
``run_ragshaper``, the one entry point of the CLI and the Python API.

:class:`RagShaperSynth` declares the stages once (the funnel of ``metrics.json`` and the report
follow this declaration), checks every input before anything is written (KB, seeds, LLM
references), builds the components with the recipe Ray workers use (:class:`.RagShaperRecipe`)
and runs :class:`.RagShaperPipeline` over pending items.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor
from agentrag.progress import ProgressArg
from agentrag.runs import RunDir, check_out_dir, config_key
from agentrag.synth.driver import (
    Pipeline,
    Stage,
    Synthesizer,
    SynthRun,
    run_synthesizer,
)
from agentrag.synth.ragshaper import analysis
from agentrag.synth.ragshaper.build import RagShaperRecipe, role_refs
from agentrag.synth.ragshaper.components import RagShaperComponents, read_seeds
from agentrag.synth.ragshaper.config import RagShaperConfig, RagShaperRunConfig, check_kb_methods
from agentrag.synth.ragshaper.pipeline import RagShaperPipeline

#: objects a Python caller may pass instead of the config's references
GIVEN = ("llm", "curator", "teacher", "tagger", "verifier", "main_kb", "retriever", "distractor_kb", "agent_factory",
         "seeds", "components")


@dataclass
class RagShaperInputs:
    """What :meth:`RagShaperSynth.check_inputs` found: the main KB (None when given as an object),
    the seed entities and where they came from."""

    main_kb: Any
    entities: list[str]
    source: str


def _given_llms(given: Mapping[str, Any]) -> dict[str, Any]:
    """``{role: LLM object}`` from ``llm=`` (every role) and ``curator=``/``teacher=``/``tagger=``."""
    out = {role: given.get("llm") for role in ("curator", "teacher", "tagger")}
    out.update({role: given[role] for role in ("curator", "teacher", "tagger") if given.get(role) is not None})
    return {k: v for k, v in out.items() if v is not None}


def check_inputs(cfg: RagShaperRunConfig, out: str | os.PathLike[str],
                 given: Mapping[str, Any] | None = None) -> RagShaperInputs:
    """Everything a run needs, checked before anything is written. Objects in ``given`` replace
    the references they stand for (see :func:`run_ragshaper`)."""
    from agentrag.llm.resolve import check_llm_ref

    given = given or {}
    comps = given.get("components")
    main_kb = comps.main_kb if comps is not None else given.get("main_kb", given.get("retriever"))
    if main_kb is None and not cfg.kb:
        raise UserError("no knowledge base: pass --kb DIR (build one with `agentrag kb build`)")
    seeds = given.get("seeds")
    if seeds is None and not cfg.seeds:
        raise UserError("no seeds: pass --seeds FILE (one entity a line) or --seeds N (sample N KB titles)")
    check_out_dir(out)
    llms = _given_llms(given)
    if comps is None:
        for role, ref in role_refs(cfg.llm, cfg.teacher, cfg.tagger).items():
            if role not in llms:
                check_llm_ref(ref)
    from agentrag.kb import KnowledgeBase

    if main_kb is None:
        assert cfg.kb is not None
        main_kb = KnowledgeBase.load(cfg.kb)
    elif (comps is None and cfg.distractors.enabled and given.get("distractor_kb") is None
          and not isinstance(main_kb, KnowledgeBase)):
        raise UserError("a main_kb that is not a KnowledgeBase needs distractor_kb= (a function of the distractor "
                        "passages returning a retriever for K~), or distractors.enabled=false")
    check_kb_methods(cfg, main_kb)  # before any LLM call
    if seeds is not None:
        entities = [str(s).strip() for s in seeds if str(s).strip()]
        if not entities:
            raise UserError("no seeds: the seeds given are empty")
        return RagShaperInputs(main_kb, list(dict.fromkeys(entities)), "given")
    assert cfg.seeds is not None
    if cfg.seeds.strip().isdigit():
        if not hasattr(main_kb, "sample_titles"):
            raise UserError("--seeds N samples KB titles: it needs a knowledge base; pass seeds=[...] instead")
        return RagShaperInputs(main_kb, main_kb.sample_titles(int(cfg.seeds), seed=cfg.seed),
                               f"kb.sample_titles({cfg.seeds}, seed={cfg.seed})")
    return RagShaperInputs(main_kb, read_seeds(cfg.seeds), str(cfg.seeds))


class RagShaperSynth(Synthesizer[RagShaperRunConfig, RagShaperInputs, RagShaperComponents]):
    """RAGShaper's declaration for the driver (see the module docstring)."""

    name = "ragshaper"
    given = GIVEN
    recipe = RagShaperRecipe
    run_files = ("seeds.jsonl", "trees.jsonl")
    key_config = ("preset", "seeds", "curator.max_depth", "paths_per_tree", "f1_threshold", "distractors.enabled")
    viewer = "agentrag.report.viewer.ragshaper_view:ragshaper_payload"
    stages = (
        Stage("explore", "seeds", "trees", ("curator action parses",), "InfoCurator trees (Eq. 2-4)", "seeds"),
        Stage("distractors", "distractor tool calls", "K~ documents",
              ("not a copy of the fact", "not the fact with additions", "no filler", "a cue",
               "verifier: no restated fact", "verifier: its declared type"), "distractor curation tool (Table 1)",
              "distractor tool calls"),
        Stage("paths", "trees", "paths", (), "Eq. 5 path selection", "trees"),
        Stage("qa", "paths", "questions", ("schema", "answer not in question", "no explanation",
                                           "one sentence", "answer stated by a main-path document",
                                           "grounded hops >= min_hops", "no single document answers",
                                           "verifier: role, one answer, single document, each hop needed"),
              "QA synthesis (Eq. 6)", "paths"),
        Stage("elicit", "questions", "trajectories", ("within the context window",),
              "teacher under constrained navigation (Eq. 7-8)", "questions"),
        Stage("filter", "trajectories", "kept trajectories", ("F1 > threshold", "no no-answer", "answer format"),
              "§3.4", "trajectories"),
        Stage("tag", "trajectories", "behaviour tags", ("valid tag",), "LLM tagger (Fig. 4 left)", "trajectories"),
        Stage("export", "kept trajectories", "SFT records", ("no malformed turn",), "SFT export", "kept trajectories"),
    )

    def check_inputs(self, cfg: RagShaperRunConfig, out: str | os.PathLike[str],
                     given: Mapping[str, Any]) -> RagShaperInputs:
        return check_inputs(cfg, out, given)

    def components(self, cfg: RagShaperRunConfig, run: RunDir, inputs: RagShaperInputs,
                   given: Mapping[str, Any]) -> RagShaperComponents:
        if given.get("components") is not None:
            return given["components"]  # type: ignore[no-any-return]
        recipe = RagShaperRecipe.from_config(cfg, run.path)  # how Ray workers rebuild them
        comps = recipe(kb=inputs.main_kb, llms=_given_llms(given))
        extra = {k: given[k] for k in ("distractor_kb", "agent_factory", "verifier") if given.get(k) is not None}
        if extra or any(k in given for k in ("main_kb", "retriever", "llm", "curator", "teacher", "tagger")):
            # objects of this process cannot be rebuilt in a worker process from the references
            extra["rebuild"] = None
        return replace(comps, **extra)

    def llm_roles(self, comps: RagShaperComponents) -> dict[str, Any]:
        # the verifier is counted on its own row only when it is not the curator (its default)
        return {"curator": comps.curator, "teacher": comps.teacher, "tagger": comps.tagger,
                "verifier": comps.verifier}

    def finished_key(self, cfg: RagShaperRunConfig, inputs: RagShaperInputs) -> str:
        return config_key(cfg, json.dumps([inputs.source, inputs.entities], ensure_ascii=False))

    def pipeline(self, ctx: SynthRun, cfg: RagShaperRunConfig, comps: RagShaperComponents,
                 inputs: RagShaperInputs) -> Pipeline:
        return RagShaperPipeline(ctx, cfg, comps, seed_source=inputs.source).pipeline(inputs.entities)

    def title(self, cfg: RagShaperRunConfig, name: str) -> str:
        return f"RAGShaper run {name}" + (" (ablation: no distractors)" if not cfg.distractors.enabled else "")

    def report_sections(self, metrics: dict[str, Any]) -> Sequence[Any]:
        return analysis.report_sections(metrics)


def run_ragshaper(cfg: RagShaperConfig, out: str | os.PathLike[str], *, progress: ProgressArg = None,
                  executor: Executor | None = None, **given: Any) -> dict[str, Any]:
    """Run RAGShaper into the run directory ``out`` (rerun = resume); returns ``metrics.json``.

    ``given`` objects replace the config's references: ``llm`` (every role), ``curator``,
    ``teacher``, ``tagger``, ``verifier`` (LLM objects; the verifier of the QA and distractor gates
    defaults to the curator), ``main_kb`` / ``retriever`` (K), ``distractor_kb`` (a
    function of the distractor passages returning K~; needed with a ``main_kb`` that is not a
    :class:`~agentrag.kb.KnowledgeBase`), ``agent_factory``, ``seeds`` (a list of entities) or
    ``components`` (a whole :class:`RagShaperComponents`). Raises :class:`~agentrag.errors.EndpointError`
    on a 401/404 (nothing is written as finished) and :class:`~agentrag.synth.driver.SynthBugs`
    when items hit a bug; items hit by an outage are counted in ``metrics["unfinished"]``.
    """
    if not isinstance(cfg, RagShaperRunConfig):
        cfg = RagShaperRunConfig.model_validate(cfg.model_dump())
    return run_synthesizer(RagShaperSynth(), cfg, out, progress=progress, executor=executor, **given)


__all__ = ["RagShaperSynth", "RagShaperInputs", "run_ragshaper", "check_inputs", "GIVEN"]
