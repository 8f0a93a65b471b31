"""RAGShaper orchestration: seeds -> trees (+ K~) -> paths -> QA -> trajectories -> filter -> tags
-> SFT export and report, every stage an append-only JSONL of the run directory keyed by stable
ids. Rerunning resumes: finished seeds, paths, questions and trajectories are skipped, and
with a cached LLM (``<run>/llm_cache.sqlite``) the calls of an interrupted item are not paid
twice. A model failure of one item becomes a flagged record; the run goes on. An outage (a
retryable LLMError / RetrievalError, after the backend's retries) is not data: the item is not
written, it is counted as unfinished in the funnel, and the next run redoes it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor, ThreadExecutor, run_items
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.paths import check_input_file
from agentrag.records import Passage, Trajectory, iter_json_objects
from agentrag.runs import RunDir
from agentrag.synth.common import Progress
from agentrag.synth.ragshaper import analysis
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.elicit import AgentFactory
from agentrag.synth.ragshaper.filter import export_sft, filter_trajectory, malformed_turns
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
from agentrag.synth.ragshaper.stages import StageTask, is_outage, is_unfinished

log = logging.getLogger(__name__)



def seed_id(entity: str) -> str:
    return "s" + hashlib.sha1(entity.strip().encode("utf-8")).hexdigest()[:10]


def read_seeds(path: str | Path) -> list[str]:
    """Seed entities from a file: one per line (text; blank lines and ``#`` comments skipped) or
    JSONL objects with an ``entity`` / ``title`` / ``seed`` field."""
    p = check_input_file(path, "--seeds")
    seeds: list[str] = []
    if p.suffix in (".jsonl", ".json"):
        for lineno, obj in iter_json_objects(p):
            value = next((obj[k] for k in ("entity", "title", "seed") if k in obj), None)
            if not isinstance(value, str) or not value.strip():
                raise UserError(f"{p}:{lineno}: field 'entity' (or 'title' / 'seed') missing or not a string")
            seeds.append(value.strip())
    else:
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                seeds.append(line.strip())
    if not seeds:
        raise UserError(f"{p}: no seed entities in the file")
    return list(dict.fromkeys(seeds))


@dataclass
class RagShaperComponents:
    """What a run talks to. ``distractor_kb`` builds the secondary KB K~ from the distractor
    passages (called once per run, after exploration)."""

    curator: LLM
    teacher: LLM
    main_kb: Retriever
    distractor_kb: Callable[[list[Passage]], Retriever]
    tagger: LLM | None = None
    agent_factory: AgentFactory | None = None
    #: For executors running items in other processes (Ray): a picklable zero-argument callable
    #: that builds these components there (once per worker process), and how a worker opens the
    #: K~ the driver built (default: ``distractor_kb`` on the same passages).
    rebuild: Callable[[], RagShaperComponents] | None = None
    open_distractor_kb: Callable[[list[Passage]], Retriever] | None = None


def _writer(store: Any) -> Callable[[Any, Any], None]:
    """``on_result`` that appends the result to a JsonlStore (the driver is the only writer)."""
    def write(_item: Any, record: Any) -> None:
        store.append(record)

    return write


class RagShaperPipeline:
    """Runs every stage over a run directory (see the module docstring)."""

    def __init__(self, run: RunDir, cfg: RagShaperConfig, comps: RagShaperComponents, progress: Progress | None = None,
                 seed_source: str = "", executor: Executor | None = None):
        self.run_dir, self.cfg, self.c, self.progress = run, cfg, comps, progress
        self.executor: Executor = executor or ThreadExecutor(cfg.concurrency)
        self.seed_source = seed_source
        self.seeds = run.stage("seeds", SeedRecord)
        self.trees = run.stage("trees", InfoTree)
        self.distractors = run.stage("distractors", DistractorDoc)
        self.paths = run.stage("paths", PathRecord)
        self.qas = run.stage("qa", QARecord)
        self.trajs = run.stage("trajectories", Trajectory)
        self.filters = run.stage("filter", FilterRecord)
        self.tags = run.stage("tags", TagRecord)
        self.unfinished: dict[str, list[str]] = {}

    def _check(self, stage: str, failed: list[Any]) -> None:
        """Outages (a retryable LLM / retrieval error after the backend's retries) and lost workers
        (the executor's retryable RunError) leave their items unfinished, noted for the report and
        redone by the next run; anything else escaping a per-item function is a bug."""
        for out in failed:
            if not is_unfinished(out.error):
                raise out.error
            self.unfinished.setdefault(stage, []).append(f"{type(out.error).__name__}: {out.error}")
        if failed:
            log.warning("%s: %d item(s) unfinished after an outage or a lost worker (e.g. %s); rerun the same "
                        "command to redo them", stage, len(failed), failed[0].error)

    # --- stages -------------------------------------------------------------------------------
    def explore(self, entities: list[str]) -> None:
        for e in entities:
            self.seeds.append(SeedRecord(id=seed_id(e), entity=e.strip(), source=self.seed_source))
        todo = [s for s in self.seeds.read() if s.id not in self.trees]
        one = StageTask("explore", self.cfg, self.c)

        def write(seed: SeedRecord, out: tuple[InfoTree, list[DistractorDoc]]) -> None:
            tree, docs = out
            for d in docs:  # K~ documents first, so a kill before the tree line only repeats cached calls
                self.distractors.append(d)
            self.trees.append(tree)

        self._check("explore", run_items(self.executor, one, todo, stage="explore", progress=self.progress,
                                             on_result=write))

    def select(self) -> None:
        for tree in self.trees:
            if tree.status == "ok":
                for p in select_paths(tree, self.cfg.paths_per_tree):
                    self.paths.append(p)

    def synthesize(self) -> None:
        todo = [p for p in self.paths if f"{p.id}-qa" not in self.qas]
        seeds = {p.seed_id for p in todo}
        one = StageTask("qa", self.cfg, self.c, data={t.id: t for t in self.trees if t.id in seeds})

        self._check("qa", run_items(self.executor, one, todo, stage="qa", progress=self.progress,
                                        on_result=_writer(self.qas)))

    def build_distractor_kb(self) -> tuple[Retriever | None, dict[str, str]]:
        kb, _passages, types = self._distractor_kb()
        return kb, types

    def _distractor_kb(self) -> tuple[Retriever | None, list[Passage], dict[str, str]]:
        docs = self.distractors.read()
        types = {d.id: d.distractor_type for d in docs}
        if not self.cfg.distractors.enabled or not docs:
            if self.cfg.distractors.enabled:
                log.warning("no distractor documents were created: the teacher reads K only")
            return None, [], types
        passages = [Passage(id=d.id, title=d.title, text=d.text,
                            metadata={"distractor_type": d.distractor_type, "seed_id": d.seed_id,
                                      "node_id": d.node_id, "source_passage_id": d.source_passage_id})
                    for d in docs]
        return self.c.distractor_kb(passages), passages, types

    def elicit(self) -> None:
        todo = [q for q in self.qas if q.status == "accepted" and f"{q.id}-t" not in self.trajs]
        if not todo:
            return
        kb_tilde, passages, types = self._distractor_kb()
        one = StageTask("elicit", self.cfg, self.c, data=types, tilde=(passages, kb_tilde))

        self._check("elicit", run_items(self.executor, one, todo, stage="elicit", progress=self.progress,
                                            on_result=_writer(self.trajs)))

    def filter_and_tag(self) -> None:
        answers = {q.id: q.answer for q in self.qas}
        for t in self.trajs:
            if t.id not in self.filters:
                self.filters.append(filter_trajectory(t, answers.get(str(t.metadata.get("qa_id")), ""),
                                                      self.cfg.f1_threshold))
        if not self.cfg.tag_behaviours:
            return
        filters = {f.id: f for f in self.filters}
        todo = [t for t in self.trajs if t.id not in self.tags]
        one = StageTask("tag", self.cfg, self.c, data={t.id: filters[t.id] for t in todo})
        self._check("tag", run_items(self.executor, one, todo, stage="tag", progress=self.progress,
                                     on_result=_writer(self.tags)))

    def export(self) -> dict[str, Any]:
        """SFT export of the kept trajectories, with the teacher's system prompt and tool schema.
        With ``malformed_turns="reject"`` a trajectory with a malformed assistant turn (bad tool
        JSON, unknown tool, extra parallel calls, an empty or untagged reply) is left out."""
        kept_ids = {f.id for f in self.filters if f.kept}
        kept = [t for t in self.trajs if t.id in kept_ids]
        dirty = {t.id for t in kept if malformed_turns(t)}
        if self.cfg.malformed_turns == "reject":
            kept = [t for t in kept if t.id not in dirty]
        summary: dict[str, Any] = {"malformed_turns": self.cfg.malformed_turns,
                                   "with_malformed_turns": len(dirty)}
        if not self.cfg.export:
            return {**summary, "skipped": "export disabled in config"}
        if not kept:
            return {**summary, "skipped": "no clean trajectory passed the filter", "records": 0}
        from agentrag.agents.prompts import REACT_SYSTEM
        from agentrag.agents.tools import search_tool_schema
        from agentrag.synth.ragshaper.elicit import teacher_settings

        settings = teacher_settings(self.cfg.elicit)
        name = settings.get("tool_name", "dense_search")
        tools = [search_tool_schema(name, self.cfg.elicit.top_k)]
        system = str(settings.get("system_prompt") or REACT_SYSTEM).format(tool=name)
        try:
            return {**summary, **export_sft(kept, self.run_dir.path / "sft", tools, system)}
        except ImportError as exc:
            log.warning("SFT export skipped: %s", exc)
            return {"skipped": f"export area unavailable: {exc}", "records": 0}

    # --- the whole run ------------------------------------------------------------------------
    def run(self, entities: list[str], name: str = "") -> dict[str, Any]:
        start = time.monotonic()
        self.explore(entities)
        self.select()
        self.synthesize()
        self.elicit()
        self.filter_and_tag()
        exported = self.export()
        return self.write_report(name or self.run_dir.path.name, exported, time.monotonic() - start)

    def llm_calls(self) -> dict[str, Any]:
        """Call statistics (cache hits, backend calls, tokens) per LLM, keyed by the roles it plays."""
        roles: dict[int, tuple[list[str], Any]] = {}
        for role, obj in (("curator", self.c.curator), ("teacher", self.c.teacher), ("tagger", self.c.tagger)):
            if obj is not None:
                roles.setdefault(id(obj), ([], obj))[0].append(role)
        return {"+".join(names): obj.stats() for names, obj in roles.values() if callable(getattr(obj, "stats", None))}

    def write_report(self, name: str, exported: dict[str, Any], elapsed: float) -> dict[str, Any]:
        trees, trajs, filters = self.trees.read(), self.trajs.read(), self.filters.read()
        qas, distractors = self.qas.read(), self.distractors.read()
        per_seed: dict[str, float] = {t.seed: round(t.elapsed, 1) for t in trees}
        seeds_by_id = {t.id: t.seed for t in trees}
        for q in qas:
            per_seed[seeds_by_id[q.seed_id]] = round(per_seed.get(seeds_by_id[q.seed_id], 0) + q.elapsed, 1)
        for t in trajs:
            s = seeds_by_id.get(str(t.metadata.get("seed_id")))
            if s is not None:
                per_seed[s] = round(per_seed[s] + t.elapsed, 1)
        metrics = {
            "name": name, "ablation_no_distractors": not self.cfg.distractors.enabled,
            "funnel": analysis.funnel(len(self.seeds), trees, distractors, self.paths.read(), qas, trajs, filters,
                                      unfinished={k: len(v) for k, v in self.unfinished.items()},
                                      export=exported, tags=self.tags.read()),
            "unfinished": {k: len(v) for k, v in self.unfinished.items()},
            "repaired": analysis.repairs(trees),
            "tool_calls": analysis.tool_calls_distribution(trajs),
            "distractors": analysis.distractor_stats(distractors, trajs, filters),
            "seeds_meeting_distractor_quota": sum(
                1 for t in trees if t.distractor_calls >= self.cfg.distractors.min_calls
                and sum(d.seed_id == t.id for d in distractors) >= self.cfg.distractors.min_docs),
            "tags": dict(Counter(t.tag for t in self.tags)),
            "tags_rule": dict(Counter(t.rule_tag for t in self.tags)),
            "seconds_per_seed": per_seed, "elapsed": round(elapsed, 1), "export": exported,
            "llm_calls": self.llm_calls(),
        }
        self.run_dir.write_json("metrics.json", metrics)
        from agentrag.render import write_report

        title = f"RAGShaper run {name}" + (" (ablation: no distractors)" if not self.cfg.distractors.enabled else "")
        write_report(self.run_dir.path, title, analysis.report_sections(metrics))
        return metrics


__all__ = ["RagShaperPipeline", "RagShaperComponents", "seed_id", "read_seeds", "is_outage"]
