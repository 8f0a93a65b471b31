"""RAGShaper's stages over a run directory: seeds -> trees (+ K~) -> paths -> QA -> trajectories ->
filter -> tags -> SFT export, every stage an append-only JSONL keyed by stable ids.

:class:`RagShaperPipeline` runs inside the synthesizer driver (:mod:`agentrag.synth.driver`,
declared in :mod:`.run`): per-item work goes through ``ctx.stage``, which applies the failure
policy (an outage leaves the item unfinished and unwritten, a 401/404 stops the run, any other
exception is a bug). Rerunning resumes: finished seeds, paths, questions and trajectories are
skipped, and the run's LLM cache (``<run>/llm_cache.sqlite``) pays no call twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from agentrag.kb.base import Retriever
from agentrag.records import Passage, Trajectory
from agentrag.runs import JsonlStore, input_order
from agentrag.synth.driver import Pipeline, SynthOutput, SynthRun
from agentrag.synth.lazy import Selected
from agentrag.synth.ragshaper import analysis
from agentrag.synth.ragshaper.components import RagShaperComponents, seed_id
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.filter import export_sft, filter_trajectory, malformed_turns
from agentrag.synth.ragshaper.lazy import ReadTask, Ref, StageIndex
from agentrag.synth.ragshaper.paths import select_paths
from agentrag.synth.ragshaper.schema import (
    DistractorDoc,
    FilterRecord,
    InfoTree,
    PathRecord,
    QARecord,
    SeedRecord,
    TagRecord,
)
from agentrag.synth.ragshaper.stages import StageTask

log = logging.getLogger(__name__)


def _writer(store: Any) -> Callable[[Any, Any], None]:
    """``on_result`` that appends the result to a JsonlStore (the driver is the only writer)."""
    def write(_item: Any, record: Any) -> None:
        store.append(record)

    return write


def kept_trajectories(trajs: JsonlStore[Trajectory], kept_ids: set[str], reject: bool) -> Selected[Trajectory]:
    """The trajectories the export takes (kept by the filter; with ``reject``, without a malformed
    turn), read anew from the stage file on each iteration, record by record."""
    return Selected(trajs, lambda t: t.id in kept_ids and not (reject and malformed_turns(t)))


class RagShaperPipeline:
    """Runs every stage over the driver's run directory (see the module docstring)."""

    def __init__(self, ctx: SynthRun, cfg: RagShaperConfig, comps: RagShaperComponents, seed_source: str = ""):
        self.ctx, self.cfg, self.c, self.seed_source = ctx, cfg, comps, seed_source
        run = ctx.run
        self.seeds = run.stage_file("seeds", SeedRecord)
        self.trees = run.stage_file("trees", InfoTree)
        self.distractors = run.stage_file("distractors", DistractorDoc)
        self.paths = run.stage_file("paths", PathRecord)
        self.qas = run.stage_file("qa", QARecord)
        self.trajs = run.stage_file("trajectories", Trajectory)
        self.filters = run.stage_file("filter", FilterRecord)
        self.tags = run.stage_file("tags", TagRecord)
        self.order: list[str] = []  # the seeds' ids in input order

    # --- stages -------------------------------------------------------------------------------
    # explore -> select -> qa and elicit -> filter -> tag run as flows (SynthRun.flow): an item's
    # next stage starts as soon as its own record is written. Path selection (Eq. 5) is per tree,
    # done by the tree's writer; the filter is per trajectory, done by the trajectory's writer.
    # The one barrier is K~, the distractor KB over every tree's distractors, before elicitation.
    def add_seeds(self, entities: list[str]) -> list[SeedRecord]:
        """Write the seeds; the ones without a tree yet."""
        for e in entities:
            self.seeds.append(SeedRecord(id=seed_id(e), entity=e.strip(), source=self.seed_source))
        return [s for s in self.seeds.read() if s.id not in self.trees]

    def _select_tree(self, tree: InfoTree) -> list[PathRecord]:
        """Eq. 5 for one tree: write its selected paths; the ones without a question yet."""
        if tree.status != "ok":
            return []
        paths = select_paths(tree, self.cfg.paths_per_tree)
        for p in paths:
            self.paths.append(p)
        return [p for p in paths if f"{p.id}-qa" not in self.qas]

    def _write_tree(self, _seed: SeedRecord, out: tuple[InfoTree, list[DistractorDoc]]) -> list[PathRecord]:
        tree, docs = out
        for d in docs:  # K~ documents first, so a kill before the tree line only repeats cached calls
            self.distractors.append(d)
        self.trees.append(tree)
        return self._select_tree(tree)

    def _qa_task(self, todo: list[PathRecord]) -> StageTask:
        # each item reads its tree from trees.jsonl (the trees of the run are not held); ``grow``:
        # the trees written by this flow are found too
        trees = StageIndex(self.trees.path, InfoTree, {p.seed_id for p in todo}, grow=True)
        return StageTask("qa", self.cfg, self.c, data=trees)

    def explore_and_synthesize(self, entities: list[str]) -> None:
        """Trees of the pending seeds, each tree's paths selected as it is written, and the QA
        synthesis of each path started at once (with the pending paths of earlier runs)."""
        todo = self.add_seeds(entities)
        self.select()  # trees of an earlier run whose paths were not written
        pending = [p for p in self.paths if f"{p.id}-qa" not in self.qas]
        explore = StageTask("explore", self.cfg, self.c)

        def write_tree(seed: SeedRecord, out: tuple[InfoTree, list[DistractorDoc]]) -> list[tuple[str, Any]]:
            return [("qa", p) for p in self._write_tree(seed, out)]

        self.ctx.flow({"explore": (explore, write_tree), "qa": (self._qa_task(pending), _writer(self.qas))},
                      [("explore", s) for s in todo] + [("qa", p) for p in pending])

    def select(self) -> None:
        """Eq. 5 for every tree (the trees of an earlier run whose paths were not written)."""
        for tree in self.trees:
            self._select_tree(tree)

    def _distractor_kb(self) -> tuple[Retriever | None, list[Passage], dict[str, str]]:
        enabled = self.cfg.distractors.enabled
        types: dict[str, str] = {}
        passages: list[Passage] = []
        for d in self.distractors:  # record by record: K~ holds the passages, not the documents
            types[d.id] = d.distractor_type
            if enabled:
                passages.append(Passage(id=d.id, title=d.title, text=d.text,
                                        metadata={"distractor_type": d.distractor_type, "seed_id": d.seed_id,
                                                  "node_id": d.node_id, "source_passage_id": d.source_passage_id}))
        if not enabled or not types:
            if enabled:
                log.warning("no distractor documents were created: the teacher reads K only")
            return None, [], types
        # in input order, not the order the trees finished in: the same K~ after any resume or concurrency
        by_id = {p.id: p for p in passages}
        passages = [by_id[k] for k in input_order(by_id, {s: i for i, s in enumerate(self.order)})]
        return self.c.distractor_kb(passages), passages, types

    def _filter(self, t: Trajectory, answer: Callable[[str], str]) -> bool:
        """The F1 filter of one trajectory (written unless there); whether it needs a tag."""
        if t.id not in self.filters:
            self.filters.append(filter_trajectory(t, answer(str(t.metadata.get("qa_id"))), self.cfg.f1_threshold))
        return self.cfg.tag_behaviours and t.id not in self.tags

    def _tag_task(self, ids: set[str]) -> ReadTask:
        # each item reads its trajectory and filter decision from their stage files (``grow``: the
        # ones this flow writes too)
        return ReadTask("tag", self.cfg, self.c, StageIndex(self.trajs.path, Trajectory, ids, grow=True),
                        data=StageIndex(self.filters.path, FilterRecord, ids, grow=True))

    def elicit_filter_tag(self) -> None:
        """Teacher trajectories of the accepted questions (after K~, the run's one barrier), each
        filtered as it is written and its behaviour tag started at once (with the trajectories of
        earlier runs still unfiltered or untagged)."""
        answers = {q.id: q.answer for q in self.qas}  # the filter's reference answers

        def answer(qa_id: str) -> str:
            return answers.get(qa_id, "")

        todo = [Ref(q.id) for q in self.qas if q.status == "accepted" and f"{q.id}-t" not in self.trajs]
        untagged = [Ref(t.id) for t in self.trajs if self._filter(t, answer)]
        steps: dict[str, tuple[Callable[[Any], Any], Any]] = {}
        if todo:
            kb_tilde, passages, types = self._distractor_kb()
            questions = StageIndex(self.qas.path, QARecord, {r.id for r in todo})  # read per item

            def write_traj(_ref: Ref, t: Trajectory) -> list[tuple[str, Any]]:
                self.trajs.append(t)
                return [("tag", Ref(t.id))] if self._filter(t, answer) else []

            steps["elicit"] = (ReadTask("elicit", self.cfg, self.c, questions, data=types,
                                        tilde=(passages, kb_tilde)), write_traj)
        if self.cfg.tag_behaviours:
            steps["tag"] = (self._tag_task({r.id for r in untagged}), _writer(self.tags))
        if steps:
            self.ctx.flow(steps, [("elicit", r) for r in todo] + [("tag", r) for r in untagged])

    def export(self) -> dict[str, Any]:
        """SFT export of the kept trajectories, with the teacher's system prompt and tool schema.
        With ``malformed_turns="reject"`` a trajectory with a malformed assistant turn (bad tool
        JSON, unknown tool, extra parallel calls, an empty or untagged reply) is left out."""
        kept_ids = {f.id for f in self.filters if f.kept}
        reject = self.cfg.malformed_turns == "reject"
        dirty = clean = 0
        for t in self.trajs:  # one pass, record by record: the export reads the file again per file
            if t.id in kept_ids:
                if malformed_turns(t):
                    dirty += 1
                else:
                    clean += 1
        summary: dict[str, Any] = {"malformed_turns": self.cfg.malformed_turns, "with_malformed_turns": dirty}
        if not self.cfg.export:
            return {**summary, "skipped": "export disabled in config"}
        if not (clean if reject else clean + dirty):
            return {**summary, "skipped": "no clean trajectory passed the filter", "records": 0}
        from agentrag.agents.prompts import REACT_SYSTEM
        from agentrag.agents.tools import search_tool_schema
        from agentrag.synth.ragshaper.elicit import teacher_settings

        settings = teacher_settings(self.cfg.elicit)
        name = settings.get("tool_name", "dense_search")
        tools = [search_tool_schema(name, self.cfg.elicit.top_k, max_k=None)]  # the tool the teacher had
        system = str(settings.get("system_prompt") or REACT_SYSTEM).format(tool=name)
        try:
            kept = kept_trajectories(self.trajs, kept_ids, reject)
            return {**summary, **export_sft(kept, self.ctx.run.path / "sft", tools, system)}
        except ImportError as exc:
            log.warning("SFT export skipped: %s", exc)
            return {"skipped": f"export area unavailable: {exc}", "records": 0}

    # --- the whole run ------------------------------------------------------------------------
    def pipeline(self, entities: list[str]) -> Pipeline:
        """Every stage over pending items, then the funnel counts and the run's own statistics
        (reused on a rerun that changed no file of the run)."""
        self.order = list(dict.fromkeys(seed_id(e) for e in entities))
        return Pipeline(steps=[partial(self.explore_and_synthesize, entities), self.elicit_filter_tag],
                        report=self.report, report_key=lambda: self.seed_source, order=lambda: self.order)

    def report(self) -> SynthOutput:
        """The export, the funnel counts and the run's statistics, read from the stage files."""
        exported = self.export()
        # the stage files themselves: the statistics read each once, record by record
        recs = analysis.RunRecords(seeds=len(self.seeds), trees=self.trees, distractors=self.distractors,
                                   paths=self.paths, qas=self.qas, trajs=self.trajs, filters=self.filters,
                                   tags=self.tags if self.cfg.tag_behaviours else None)
        counts, notes = analysis.stage_counts(recs, exported)
        return SynthOutput(counts=counts, export=exported,
                           details=analysis.details(recs, self.cfg, notes, self.seed_source))


__all__ = ["RagShaperPipeline", "kept_trajectories"]
