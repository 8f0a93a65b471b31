"""``run_reasonrag``: a whole ReasonRAG run from its config, the one entry point of the CLI and the
Python API, declared as :class:`ReasonRagSynth` and run by the one synthesizer driver
(:func:`agentrag.synth.driver.run_synthesizer`): every input is checked before anything is
written (datasets, KB reference, LLM references, output path), the components are built with
the recipe Ray workers use (:class:`ReasonRagRecipe`), the stages run over pending questions,
then ``metrics.json`` (the driver's typed metrics, Table-1 statistics beside them) and the report.

Objects passed by a Python caller replace the config's references: ``llm`` (or ``policy``),
``judge``, ``retriever``, a whole ``components`` (:class:`ReasonRagComponents`, with its own
``rebuild`` recipe for worker processes), and ``questions`` (a list of :class:`QAItem` in place
of ``--dataset``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor
from agentrag.progress import ProgressArg
from agentrag.records import QAItem, Trajectory
from agentrag.runs import RunDir, check_out_dir, config_key, records_key
from agentrag.synth.driver import (
    Pipeline,
    PipelineStep,
    Stage,
    Synthesizer,
    SynthOutput,
    SynthRun,
    ids_key,
    run_synthesizer,
)
from agentrag.synth.reasonrag.config import ReasonRagRunConfig
from agentrag.synth.reasonrag.pairs import PAIR_GATES
from agentrag.synth.reasonrag.pipeline import (
    ReasonRagComponents,
    RunFiles,
    Selected,
    build_pairs,
    check_tree_settings,
    export,
    greedy_catch_up,
    search,
)
from agentrag.synth.reasonrag.stats import report_sections as stats_sections
from agentrag.synth.reasonrag.stats import run_statistics
from agentrag.synth.reasonrag.tree import IterationEvent, SearchTree
from agentrag.threads import passive_openmp

#: objects a Python caller may pass to :func:`run_reasonrag`
GIVEN = ("llm", "policy", "judge", "retriever", "components", "questions")


def check_questions(items: Sequence[QAItem], sources: Sequence[str] | None = None) -> list[QAItem]:
    """``items`` if their ids are unique and each has a gold answer (SPRE and the judge need one)."""
    seen: dict[str, str] = {}
    for i, it in enumerate(items):
        where = sources[i] if sources else "questions"
        if it.id in seen:
            raise UserError(f"{where}: question id {it.id!r} also occurs in {seen[it.id]}; ids must be unique "
                            "across --dataset files")
        if not it.golden_answers:
            raise UserError(f"{where}: question {it.id!r} has no gold answer (SPRE and the judge need one)")
        seen[it.id] = where
    return list(items)


def load_questions(cfg: ReasonRagRunConfig) -> list[QAItem]:
    """The questions of every ``cfg.dataset`` file (first ``cfg.limit`` of each); ids must be unique."""
    from agentrag.eval.datasets import load_dataset

    if not cfg.dataset:
        raise UserError("no dataset: pass --dataset FILE (repeatable)")
    items: list[QAItem] = []
    sources: list[str] = []
    for path in cfg.dataset:
        for it in load_dataset(path, limit=cfg.limit):
            it.metadata["source"] = Path(path).name
            items.append(it)
            sources.append(path)
    return check_questions(items, sources)


def check_inputs(cfg: ReasonRagRunConfig, out: str | os.PathLike[str],
                 given: Mapping[str, Any] | None = None) -> list[QAItem]:
    """Everything a run needs, checked before anything is written; returns the questions."""
    from agentrag.llm.resolve import check_llm_ref

    given = given or {}
    items = check_questions(given["questions"]) if given.get("questions") is not None else load_questions(cfg)
    has = {k for k, v in given.items() if v is not None}
    if not cfg.kb and not has & {"retriever", "components"}:
        raise UserError("no knowledge base: pass --kb DIR or --kb http://host:port")
    check_out_dir(out)
    refs = []
    if not has & {"llm", "policy", "components"}:
        refs.append(cfg.llm)
    if cfg.judge and not has & {"judge", "components"}:
        refs.append(cfg.judge)
    for ref in dict.fromkeys(refs):
        check_llm_ref(ref)
    return items


@dataclass
class ReasonRagRecipe:
    """Plain-data recipe of a run's components, rebuilt in worker processes (the Ray executor): the
    policy and judge LLMs on the run's cache and the retriever (a KB directory loaded read-only, or
    a retrieval server URL)."""

    llm: str
    judge: str | None
    kb: str
    run_dir: str

    @classmethod
    def from_config(cls, cfg: ReasonRagRunConfig, run_dir: str | os.PathLike[str]) -> ReasonRagRecipe:
        return cls(llm=cfg.llm, judge=cfg.judge, kb=cfg.kb or "", run_dir=str(run_dir))

    def __call__(self, kb: Any = None, llms: Mapping[str, Any] | None = None) -> ReasonRagComponents:
        """The components; ``kb`` (a retriever) and ``llms`` (``policy``, ``judge``: objects a
        Python caller passed) replace what the references would resolve to."""
        passive_openmp()
        from agentrag.kb import resolve_retriever
        from agentrag.synth.worker import resolve_role_llms

        given = {k: v for k, v in (llms or {}).items() if v is not None}
        refs = {"policy": self.llm}
        if self.judge and self.judge != self.llm:
            refs["judge"] = self.judge
        built = {**resolve_role_llms({k: v for k, v in refs.items() if k not in given}, self.run_dir), **given}
        return ReasonRagComponents(llm=built["policy"], retriever=kb if kb is not None else resolve_retriever(self.kb),
                                   judge=built.get("judge"), rebuild=self)


def flagged_rollouts(tree: SearchTree) -> int:
    """The SPRE rollouts of ``tree`` cut short by a failed call (no value)."""
    return sum(1 for n in tree.nodes for e in n.estimates if e.flag)


def flags(error_expansion: int, flagged_rollout: int) -> dict[str, int]:
    out = {"error_expansion": error_expansion, "flagged_rollout": flagged_rollout}
    return {k: v for k, v in out.items() if v}


class ReasonRagSynth(Synthesizer[ReasonRagRunConfig, list[QAItem], ReasonRagComponents]):
    """ReasonRAG's declaration for the driver (stages, inputs, components, pipeline, report)."""

    name = "reasonrag"
    given = GIVEN
    recipe = ReasonRagRecipe
    run_files = ("questions.jsonl", "events.jsonl")
    key_config = ("value.kind", "mcts.iterations", "mcts.max_children", "mcts.max_iter", "value.rollouts",
                  "pairs.min_gap", "limit")
    viewer = "agentrag.report.viewer.reasonrag_view:reasonrag_payload"
    stages = (
        Stage("questions", "dataset", "questions.jsonl", about="QA items with gold answers", unit="questions"),
        Stage("mcts", "questions.jsonl", "events.jsonl, trees.jsonl", gates=("error_expansion", "flagged_rollout"),
              about="MCTS over reason_ground steps valued by SPRE (Eq. 1) or the judge (Eq. 6)"),
        Stage("greedy", "trees.jsonl", "greedy.jsonl", about="greedy reason_ground agent (report baseline)"),
        Stage("pairs", "trees.jsonl", "pairs.jsonl", gates=PAIR_GATES,
              about="sibling preference pairs (sibling pairs in, pairs out)", unit="sibling pairs"),
        Stage("dpo", "pairs.jsonl", "dpo/trl_dpo.jsonl", about="TRL + LLaMA-Factory DPO export", unit="pairs"),
    )

    def check_inputs(self, cfg: ReasonRagRunConfig, out: str | os.PathLike[str],
                     given: Mapping[str, Any]) -> list[QAItem]:
        items = check_inputs(cfg, out, given)
        check_tree_settings(cfg, Path(out))  # trees of other search settings: refused with the diff
        return items

    def components(self, cfg: ReasonRagRunConfig, run: RunDir, inputs: list[QAItem],
                   given: Mapping[str, Any]) -> ReasonRagComponents:
        if given.get("components") is not None:
            return given["components"]  # type: ignore[no-any-return]
        recipe = ReasonRagRecipe.from_config(cfg, run.path)  # how Ray workers rebuild them
        comps = recipe(kb=given.get("retriever"),
                       llms={"policy": given.get("llm") or given.get("policy"), "judge": given.get("judge")})
        # objects cannot travel to worker processes: a run on them has no rebuild recipe
        if any(given.get(k) is not None for k in ("llm", "policy", "judge", "retriever")):
            comps.rebuild = None
        return comps

    def llm_roles(self, comps: ReasonRagComponents) -> dict[str, Any]:
        return {"policy": comps.llm, "judge": comps.judge or comps.llm}

    def finished_key(self, cfg: ReasonRagRunConfig, inputs: list[QAItem]) -> str:
        return config_key(cfg, records_key(inputs))

    def pipeline(self, ctx: SynthRun, cfg: ReasonRagRunConfig, comps: ReasonRagComponents,
                 inputs: list[QAItem]) -> Pipeline:
        """Search and greedy over pending questions, the greedy catch-up, pairs; statistics, export."""
        files = RunFiles(ctx.run)
        ids = {q.id for q in inputs}
        # trees.jsonl is streamed (read tree by tree, once per pass): nothing per tree is held
        # beyond its id and the small numbers of the statistics (docs/scale.md, bounded memory)
        trees = Selected(files.trees, lambda t: t.id in ids)
        done: set[str] = set()
        built: dict[str, Any] = {}

        def searched() -> Iterator[SearchTree]:
            for t in trees:
                done.add(t.id)
                yield t

        def pair_step() -> None:
            built["candidates"], built["rejected"] = build_pairs(cfg, files, searched())

        steps: list[PipelineStep] = [lambda: search(ctx, cfg, comps, files, inputs)]
        if cfg.greedy_baseline:
            steps.append(greedy_catch_up(cfg, comps, files, inputs))
        steps.append(pair_step)

        def report() -> SynthOutput:
            # every stage file is streamed (read record by record, once per pass): the report
            # holds counters, not the run's trees, events, pairs or greedy trajectories
            pairs = Selected(files.pairs, lambda p: p.metadata.get("question_id") in ids)
            exported = export(cfg, files, pairs)
            tally = {"greedy": 0, "error_expansion": 0, "flagged_rollout": 0}

            def events() -> Iterator[IterationEvent]:
                for ev in files.events:
                    if ev.question_id in ids:
                        tally["error_expansion"] += ev.outcome == "error" and ev.question_id in done
                        yield ev

            def greedy() -> Iterator[Trajectory]:
                for g in files.greedy:
                    if g.id in ids:
                        tally["greedy"] += 1
                        yield g

            def counted() -> Iterator[SearchTree]:
                for t in trees:
                    tally["flagged_rollout"] += flagged_rollouts(t)
                    yield t

            stats = run_statistics(counted(), events(), pairs, greedy(), tree_ids=done)
            details = {"value": cfg.value.kind, **stats}
            n_pairs = int(details["pairs"])
            counts: dict[str, tuple[int, int, Mapping[str, int]]] = {
                "questions": (len(inputs), len(inputs), {}),
                "mcts": (len(inputs), len(done), flags(tally["error_expansion"], tally["flagged_rollout"])),
                "pairs": (built["candidates"], n_pairs, dict(built["rejected"])),
                "dpo": (n_pairs, int(exported.get("exported", 0)), {}),
            }
            if cfg.greedy_baseline:
                counts["greedy"] = (len(done), tally["greedy"], {})
            return SynthOutput(counts=counts, export=exported, details=details)
        # the export setting is part of the key: a rerun that only turns it off or on redoes the export
        return Pipeline(steps=steps, report=report, report_key=lambda: f"{ids_key(ids)}:export={cfg.export}",
                        order=lambda: [q.id for q in inputs])

    def title(self, cfg: ReasonRagRunConfig, name: str) -> str:
        return f"ReasonRAG run {name} ({cfg.value.kind} values)"

    def report_sections(self, metrics: dict[str, Any]) -> list[dict[str, Any]]:
        return stats_sections(metrics)


def run_reasonrag(cfg: ReasonRagRunConfig, out: str | os.PathLike[str], *, progress: ProgressArg = None,
                  executor: Executor | None = None, **given: Any) -> dict[str, Any]:
    """Run ReasonRAG into the run directory ``out`` (rerun = resume); returns ``metrics.json``'s
    object. ``given`` objects (``llm``/``policy``, ``judge``, ``retriever``, ``components``,
    ``questions``) replace the config's references. Raises :class:`~agentrag.synth.driver.SynthBugs`
    (after writing metrics and report) when a question hit a bug; an
    :class:`~agentrag.errors.EndpointError` (401/404) stops the run at once."""
    return run_synthesizer(ReasonRagSynth(), cfg, out, progress=progress, executor=executor, **given)


__all__ = ["run_reasonrag", "check_inputs", "check_questions", "load_questions", "ReasonRagRecipe",
           "ReasonRagSynth", "GIVEN"]
