"""The human-annotation teacher as a :class:`~agentrag.synth.driver.Synthesizer`, and
``run_annotated``: what ``agentrag synth annotated`` does, as a library call.

Deviation from the papers: RAGShaper, EviPath and Tracer have an LLM teacher explore the KB and
write the trajectories; here the human annotations of the training files (MuSiQue
decompositions, 2WikiMultihopQA evidence triples) are the teacher and only the searches are
real. No LLM is called, so the run works on a CPU with the embedded model only (docs/loop.md).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from agentrag.errors import UserError
from agentrag.kb.reference import is_kb_url
from agentrag.paths import check_out_dir
from agentrag.progress import ProgressArg
from agentrag.records import QAItem, Record, Trajectory, iter_json_objects
from agentrag.runs import RunDir, config_key, records_key
from agentrag.synth.annotated.config import AnnotatedRunConfig
from agentrag.synth.annotated.gates import first_failure
from agentrag.synth.annotated.teacher import (
    Hop,
    SearchedHop,
    forced_record,
    is_forced,
    item_hops,
    new_tool,
    path_trajectory,
    search_path,
    summary,
)
from agentrag.synth.driver import (
    PendingStage,
    Pipeline,
    Stage,
    Synthesizer,
    SynthOutput,
    SynthRun,
    run_synthesizer,
)

GIVEN = ("retriever",)
PATHS = "paths.jsonl"
SFT_DIR = "sft"
PE_DIR = "sft_planner_executor"
RG_DIR = "sft_reason_ground"


class PathRecord(Record):
    """One item's outcome: kept with its trajectory, or dropped with the first failing gate."""

    id: str
    source: str = ""
    kept: bool = False
    reason: str | None = None
    trajectory: Trajectory | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


@dataclass
class AnnotatedInputs:
    items: list[QAItem]
    titles: dict[str, dict[int, str]]  # item id -> {paragraph idx: title} (MuSiQue)


@dataclass
class AnnotatedComponents:
    retriever: Any


def read_annotated(paths: Sequence[str], limit: int | None) -> AnnotatedInputs:
    """Items of raw MuSiQue / 2Wiki training files with their annotations (other formats refused)."""
    from agentrag.eval.datasets import detect_format, load_dataset

    items: list[QAItem] = []
    titles: dict[str, dict[int, str]] = {}
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise UserError(f"--dataset {path!r}: no such file")
        if "dev" in p.name.lower() or "test" in p.name.lower():
            raise UserError(f"--dataset {path!r} looks like an evaluation file; the teacher trains only on "
                            "training files (../shared/data/MANIFEST.md)")
        first = next(iter(iter_json_objects(p)), None)
        fmt = detect_format(first[1], path=p) if first else ""
        if fmt not in ("musique", "2wiki"):
            raise UserError(f"--dataset {path!r}: format {fmt or 'empty'!r}; the teacher reads raw MuSiQue "
                            "(question_decomposition) or 2WikiMultihopQA (evidences) files")
        items.extend(load_dataset(p, fmt, limit=limit))
        if fmt == "musique":
            for n, (_, obj) in enumerate(iter_json_objects(p)):
                if limit is not None and n >= limit:
                    break
                titles[str(obj["id"])] = {int(q.get("idx", i)): str(q.get("title", ""))
                                          for i, q in enumerate(obj.get("paragraphs", []))}
    return AnnotatedInputs(items, titles)


class AnnotatedSynth(Synthesizer[AnnotatedRunConfig, AnnotatedInputs, AnnotatedComponents]):
    """Human annotations searched in the KB -> react SFT trajectories (no LLM)."""

    name = "annotated"
    given = GIVEN
    stages = (
        Stage("items", "raw MuSiQue / 2Wiki training files", "annotated hops", ("annotation",),
              "decompositions / evidence triples as hops"),
        Stage("search", "annotated hops", PATHS, (), "every hop searched in the KB (react's tool)"),
        Stage("gates", PATHS, PATHS, ("support_retrieved", "no_leakage", "distinct_hops", "answer_grounded"),
              "first failed gate"),
        Stage("export", PATHS, f"{SFT_DIR}/", ("answered",), "react SFT (TRL + sharegpt)"),
    )

    def check_inputs(self, cfg: AnnotatedRunConfig, out: str | os.PathLike[str],
                     given: Mapping[str, Any]) -> AnnotatedInputs:
        if not cfg.datasets:
            raise UserError("no dataset: pass --dataset FILE (raw MuSiQue or 2WikiMultihopQA training file)")
        if not (cfg.kb or given.get("retriever")):
            raise UserError("every hop is searched in a KB: pass --kb DIR (built from the training contexts)")
        if cfg.kb and not is_kb_url(cfg.kb) and not Path(cfg.kb).is_dir():
            raise UserError(f"--kb {cfg.kb!r} is not a KB directory; build one with `agentrag kb build`")
        check_out_dir(out)
        return read_annotated(cfg.datasets, cfg.limit)

    def components(self, cfg: AnnotatedRunConfig, run: RunDir, inputs: AnnotatedInputs,
                   given: Mapping[str, Any]) -> AnnotatedComponents:
        retriever = given.get("retriever")
        if retriever is None:
            from agentrag.kb import resolve_retriever

            retriever = resolve_retriever(str(cfg.kb))
        return AnnotatedComponents(retriever)

    def llm_roles(self, comps: AnnotatedComponents) -> dict[str, Any]:
        return {}

    def finished_key(self, cfg: AnnotatedRunConfig, inputs: AnnotatedInputs) -> str:
        return config_key(cfg, records_key(inputs.items), json.dumps(inputs.titles, sort_keys=True, ensure_ascii=False))

    def pipeline(self, ctx: SynthRun, cfg: AnnotatedRunConfig, comps: AnnotatedComponents,
                 inputs: AnnotatedInputs) -> Pipeline:
        from agentrag.agents.navigation import PlainNavigation

        store = ctx.run.stage_file("paths", PathRecord)
        policy = PlainNavigation(comps.retriever)

        def work(item: QAItem) -> PathRecord:
            source = str(item.metadata.get("source", ""))
            hops = item_hops(item, inputs.titles.get(item.id))
            answer = item.golden_answers[0]
            reason = first_failure(item.question, answer, hops, None, cfg.max_hops)
            if reason:
                return PathRecord(id=item.id, source=source, reason=reason)
            searched = search_path(hops, new_tool(policy, cfg.top_k, cfg.max_top_k, cfg.doc_chars))
            reason = first_failure(item.question, answer, hops, searched, cfg.max_hops, cfg.doc_chars)
            traj = None if reason else path_trajectory(item, searched, thoughts=cfg.thoughts,
                                                                 system_prompt=cfg.system_prompt)
            return PathRecord(id=item.id, source=source, kept=reason is None, reason=reason, trajectory=traj,
                              detail=summary(searched))

        search = PendingStage("search", work, lambda: [i for i in inputs.items if i.id not in store],
                              lambda _i, rec: store.append(rec))
        return Pipeline(steps=[search], report=lambda: self._output(cfg, ctx, store.read(), len(inputs.items)),
                        order=lambda: [i.id for i in inputs.items])

    def _output(self, cfg: AnnotatedRunConfig, ctx: SynthRun, records: list[PathRecord], n_items: int) -> SynthOutput:
        from agentrag.agents.tools import search_tool_schema
        from agentrag.export.sft import TRL_FILE, to_trl_records, write_jsonl_dicts, write_sft_export

        gate_of = {"annotation": "items"}
        item_rej = Counter(r.reason.split(":")[0] for r in records if r.reason and gate_of.get(r.reason.split(":")[0]))
        gate_rej = Counter(r.reason.split(":")[0] for r in records if r.reason and not gate_of.get(r.reason.split(":")[0]))
        n_searched = len(records) - sum(item_rej.values())
        kept = [r.trajectory for r in records if r.kept and r.trajectory is not None]
        forced = [t for t in kept if is_forced(t.id, cfg.forced_share)]
        free = [t for t in kept if not is_forced(t.id, cfg.forced_share)]
        tools = [search_tool_schema(default_k=cfg.top_k, max_k=cfg.max_top_k)]  # the react agent's schema
        export = write_sft_export(ctx.run.file(SFT_DIR), free, tools=tools)
        if forced:  # the forced-answer form: TRL only (sharegpt has no user turn after an observation)
            trl = ctx.run.file(SFT_DIR) / TRL_FILE
            rows = [json.loads(line) for line in trl.read_text(encoding="utf-8").splitlines() if line.strip()]
            rows += [forced_record(r) for r in to_trl_records(forced, None, tools)]
            write_jsonl_dicts(trl, rows)
            export["exported"] = int(export["exported"]) + len(forced)
            export["trajectories"] = len(kept)
        export["forced_answer"] = len(forced)
        if cfg.planner_executor and kept:
            export["planner_executor"] = self._pe_export(ctx, cfg, [r for r in records if r.kept and r.trajectory])
        if cfg.reason_ground and kept:
            export["reason_ground"] = self._rg_export(ctx, cfg, [r for r in records if r.kept and r.trajectory])
        by_source = Counter(r.source for r in records if r.kept)
        return SynthOutput(
            counts={"items": (n_items, n_items - sum(item_rej.values()), dict(item_rej)),
                    "search": (n_items - sum(item_rej.values()), n_searched, {}),
                    "gates": (n_searched, len(kept), dict(gate_rej)),
                    "export": (len(kept), int(export["exported"]), {})},
            export={k: v for k, v in export.items() if k != "files"},
            details={"kept_by_source": dict(by_source), "protocol": cfg.protocol,
                     "mean_hops_kept": round(sum(len(t.steps) - 1 for t in kept) / len(kept), 2) if kept else None})

    @staticmethod
    def _pe_export(ctx: SynthRun, cfg: AnnotatedRunConfig, kept: list[PathRecord]) -> dict[str, Any]:
        """EviPath planner_executor conversations of the kept paths (rebuilt from the stored records);
        a path whose executor chat EviPath's own gates would reject (a hop answer its selected
        passages state only as a nationality or an abbreviation) is left out, counted in ``dropped``."""
        from agentrag.export.chat import write_chat_export
        from agentrag.synth.annotated.pe import executor_conversation, executor_problem, planner_conversation

        chats = []
        dropped: Counter[str] = Counter()
        n_paths = 0
        for r in kept:
            assert r.trajectory is not None
            searched = stored_hops(r)
            problem = next((p for sh in searched if (p := executor_problem(sh, cfg.doc_chars))), None)
            if problem:  # EviPath's sub_answer_support gate would reject this executor chat
                dropped["sub_answer_support"] += 1
                continue
            n_paths += 1
            chats.append(planner_conversation(r.trajectory.question, r.trajectory.answer or "", searched))
            chats.extend(executor_conversation(sh, cfg.doc_chars) for sh in searched)
        info = write_chat_export(
            ctx.run.file(PE_DIR), chats, name="agentrag_annotated_planner_executor",
            summary={"planner_conversations": n_paths, "executor_conversations": len(chats) - n_paths},
            description="Human-annotation paths searched in the KB as EviPath planner_executor chats: multi-turn "
                        "planner conversations (think + Search actions, templated executor answers as "
                        "observations) and single-turn executor conversations (sub-question + retrieved "
                        "evidence -> think / select / answer). Train on assistant turns only.")
        return {**{k: v for k, v in info.items() if k != "files"}, "dropped": dict(dropped)}

    @staticmethod
    def _rg_export(ctx: SynthRun, cfg: AnnotatedRunConfig, kept: list[PathRecord]) -> dict[str, Any]:
        """ReasonRAG reason_ground rounds of the kept paths (rebuilt from the stored records)."""
        from agentrag.export.sft import write_sft_export
        from agentrag.synth.annotated.rg import rg_trajectory

        trajs = []
        for r in kept:
            assert r.trajectory is not None
            item = QAItem(id=r.id, question=r.trajectory.question, golden_answers=[r.trajectory.answer or ""],
                          metadata={"source": r.source})
            trajs.append(rg_trajectory(item, stored_hops(r), cfg.doc_chars))
        info = write_sft_export(ctx.run.file(RG_DIR), trajs, tools=[])
        return {k: v for k, v in info.items() if k != "files"}

    def report_sections(self, metrics: dict[str, Any]) -> Sequence[Any]:
        rows = [[r["stage"], r["in"], r["out"], ", ".join(f"{k}: {v}" for k, v in r["rejected"].items())]
                for r in metrics.get("funnel", [])]
        return [{"title": "Funnel", "text": "Human annotations (MuSiQue decompositions, 2Wiki evidence triples) "
                 "searched in the KB; a path is kept when every hop retrieved its supporting paragraph and "
                 f"the gates passed. Kept by source: {metrics.get('kept_by_source')}; mean hops "
                 f"{metrics.get('mean_hops_kept')}. No LLM was called.{_pe_note(metrics)}",
                 "headers": ["stage", "in", "out", "rejected"], "rows": rows}]


def _pe_note(metrics: Mapping[str, Any]) -> str:
    pe = (metrics.get("export") or {}).get("planner_executor") or {}
    if not pe:
        return ""
    dropped = pe.get("dropped") or {}
    left = f"; left out (EviPath's gates would reject them): {dropped}" if dropped else ""
    return f" planner_executor: {pe.get('planner_conversations', 0)} planner conversations{left}."


def stored_hops(rec: PathRecord) -> list[SearchedHop]:
    """The searched hops of a kept record (its trajectory's searches and the funnel's annotation)."""
    assert rec.trajectory is not None
    d = rec.detail
    steps = [s for s in rec.trajectory.steps if s.action is not None]
    return [SearchedHop(Hop(q, a, list(sup)), s.observation or "", list(s.hits))
            for q, a, sup, s in zip(d["queries"], d["answers"], d["support"], steps, strict=True)]


def run_annotated(cfg: AnnotatedRunConfig, out: str | os.PathLike[str], *, progress: ProgressArg = None,
                  **given: Any) -> dict[str, Any]:
    """Run the teacher into ``out`` (rerun = resume); returns ``metrics.json``'s object.
    ``retriever`` replaces ``cfg.kb``."""
    return run_synthesizer(AnnotatedSynth(), cfg, out, progress=progress, **given)


__all__ = ["AnnotatedSynth", "PathRecord", "read_annotated", "run_annotated", "stored_hops", "PATHS", "SFT_DIR", "PE_DIR", "RG_DIR"]
