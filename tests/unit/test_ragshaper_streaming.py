"""RAGShaper's statistics and SFT export stream the run's stage files (issue 27, part 3: peak
memory): they hold a few records at a time and give the same ``metrics.json`` and export files,
byte for byte, as the list-based code they replaced (kept in ``ragshaper_reference``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ragshaper_reference as ref
from test_ragshaper_support import ShaperRun, curator_reply, main_retriever, teacher_reply
from test_synth_streaming import Alive, Reiterable

from agentrag.errors import ContextLimitError
from agentrag.export.sft import write_sft_export
from agentrag.records import Hit, Message, Passage, Provenance, Step, ToolCall, Trajectory
from agentrag.runs import JsonlStore, RunDir
from agentrag.synth.ragshaper import analysis
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.filter import malformed_turns
from agentrag.synth.ragshaper.pipeline import kept_trajectories
from agentrag.synth.ragshaper.schema import (
    DistractorDoc,
    FilterRecord,
    InfoTree,
    PathRecord,
    QARecord,
    TagRecord,
    TreeNode,
)
from agentrag.testing import FakeRetriever, ScriptedLLM

TYPES = ("doppelganger", "false_shortcut", "fragmented_puzzle", "subjective_fallacy")
PROV = Provenance(stage="x")


def _tree(i: int) -> InfoTree:
    nodes = [TreeNode(id=f"t{i}-n{j}", error=[None, "distractor_tool: parse_error x", "parse_error: y",
                                                "empty query"][(i + j) % 4],
                      repaired=[["empty query -> seed"], ["invalid top_k 'x' -> 3"], []][(i + j) % 3],
                      rejected=[["doppelganger: copy: the distractor is the source again"],
                                ["subjective_fallacy: restates: verifier: restates: it states the fact"], []][(i + j) % 3])
             for j in range(i % 3 + 1)]
    return InfoTree(id=f"t{i}", seed=f"Seed {i % 50}", nodes=nodes, status="failed" if i % 9 == 0 else "ok",
                    error="explore: curator outage" if i % 9 == 0 else None, distractor_calls=i % 4,
                    elapsed=0.37 * (i % 5))


def _doc(i: int) -> DistractorDoc:
    return DistractorDoc(id=f"d{i}", seed_id=f"t{i % 7 * 3}", node_id="n", distractor_type=TYPES[i % 4], title="T",
                         text="x", original_fact="f", provenance=PROV)


def _qa(i: int) -> QARecord:
    reason = [None, None, "answer_in_question: the span", "schema_failure: parse_error z", "ungrounded"][i % 5]
    return QARecord(id=f"p{i}-qa", path_id=f"p{i}", seed_id=f"t{i % 60}", status="rejected" if reason else "accepted",
                    reason=reason, question="Q?", answer="1901", elapsed=0.11 * (i % 7), provenance=PROV)


def _traj(i: int) -> Trajectory:
    met = [{"step": 1, "id": f"d{i}", "distractor_type": TYPES[i % 4]}] if i % 3 else []
    err = ["context_limit: 9000 tokens", "search failed", None, None][i % 4]
    steps = [Step(thought="t", action=ToolCall(name="dense_search", arguments={"query": "q"}),
                  hits=[Hit(id="h", title="H", text="the 1901 bridge", score=1.0)],
                  error="unknown tool 'x'" if i % 5 == 0 else None),
             Step(thought=f"<answer>{'1901' if i % 6 else '1900'}</answer>")]
    return Trajectory(id=f"p{i}-qa-t", question="Q?", answer="1901" if i % 6 else "1900", steps=steps,
                      finish_reason=["answered", "answered", "max_steps"][i % 3], elapsed=0.23 * (i % 4),
                      metadata={"seed_id": f"t{i % 70}", "qa_id": f"p{i}-qa", "tool_calls": i % 4, "error": err,
                                "distractors_met": met, "distractor_types_met": sorted({m["distractor_type"]
                                                                                         for m in met})})


def _filter(i: int) -> FilterRecord:
    reason = [None, None, "answer_not_in_format: no tags", None, "f1_below_threshold: f1=0.0"][i % 5]
    kept = reason is None and i % 7 != 3
    return FilterRecord(id=f"p{i}-qa-t", qa_id=f"p{i}-qa", prediction="1901", answer="1901", f1=1.0 if kept else 0.0,
                        kept=kept, reason=reason)


def _tag(i: int) -> TagRecord:
    return TagRecord(id=f"p{i}-qa-t", tag="untagged" if i % 8 == 0 else ["direct_answer", "failure"][i % 2],
                     rule_tag=["handling_success", "failure", "retrieval_success"][i % 3],
                     error="parse_error: not a tag" if i % 8 == 0 else None, provenance=PROV)


MAKE: dict[str, Any] = {"trees": _tree, "distractors": _doc, "qas": _qa, "trajs": _traj, "filters": _filter,
                        "tags": _tag, "paths": lambda i: PathRecord(id=f"p{i}", seed_id=f"t{i}", seed="s", node_ids=[],
                                                                    score=1, rank=0)}


def _reference(recs: dict[str, list[Any]], seeds: int, cfg: RagShaperConfig, export: dict[str, Any]) -> str:
    counts, notes = ref.stage_counts(seeds, recs["trees"], recs["distractors"], recs["paths"], recs["qas"],
                                     recs["trajs"], recs["filters"], recs["tags"], export)
    details = ref.details(recs["trees"], recs["distractors"], recs["qas"], recs["trajs"], recs["filters"],
                          recs["tags"], cfg, notes, "given")
    return json.dumps([counts, details])


def test_statistics_stream_with_rejections_of_every_kind_and_equal_the_list_code() -> None:
    n = 240
    cfg = RagShaperConfig()
    cfg.distractors.min_calls, cfg.distractors.min_docs = 2, 2
    export = {"malformed_turns": "reject", "with_malformed_turns": 7, "exported": 30}
    alive = Alive()
    recs = analysis.RunRecords(seeds=n + 3, tags=alive.stream(n, _tag),
                               **{k: alive.stream(n, f) for k, f in MAKE.items() if k != "tags"})
    counts, notes = analysis.stage_counts(recs, export)
    got = json.dumps([counts, analysis.details(recs, cfg, notes, "given")])
    assert alive.max <= 9  # the record read and the last of each finished loop
    lists = {k: [f(i) for i in range(n)] for k, f in MAKE.items()}
    assert got == _reference(lists, n + 3, cfg, export)
    # every kind of rejection is there to be counted
    for stage in ("explore", "distractors", "qa", "elicit", "filter", "tag"):
        assert counts[stage][2], stage
    assert counts["export"] == (counts["filter"][1], 30, {"malformed_turns": 7})
    assert "(none met)" in json.loads(got)[1]["distractors"]["success_by_type_met"]
    assert 0 < json.loads(got)[1]["seeds_meeting_distractor_quota"] < n
    # no tagger, no distractors: the other branches
    cfg.distractors.enabled = False
    recs = analysis.RunRecords(seeds=n, **{k: Reiterable(alive, n, f) for k, f in MAKE.items() if k != "tags"})
    counts, notes = analysis.stage_counts(recs, {})
    lists["tags"] = None  # type: ignore[assignment]
    assert json.dumps([counts, analysis.details(recs, cfg, notes, "given")]) == _reference(lists, n, cfg, {})


def test_sft_export_streams_the_kept_trajectories_and_writes_what_the_list_writes(tmp_path: Path) -> None:
    n = 90
    trajs: JsonlStore[Trajectory] = JsonlStore(tmp_path / "trajectories.jsonl", Trajectory)
    for i in range(n):
        trajs.append(_traj(i))
    kept_ids = {f.id for f in map(_filter, range(n)) if f.kept}
    alive = Alive()
    streamed = write_sft_export(tmp_path / "s", Reiterable(alive, n, _traj), "sys", None)
    assert alive.max <= 3
    for reject in (True, False):
        listed = [t for t in trajs.read() if t.id in kept_ids and not (reject and malformed_turns(t))]
        out = write_sft_export(tmp_path / f"l{reject}", listed, "sys", None)
        sel = write_sft_export(tmp_path / f"k{reject}", kept_trajectories(trajs, kept_ids, reject), "sys", None)
        assert {k: v for k, v in out.items() if k != "files"} == {k: v for k, v in sel.items() if k != "files"}
        assert 0 < out["exported"] < out["trajectories"]  # unanswered ones are skipped
        for name in ("trl_sft.jsonl", "sharegpt.jsonl", "dataset_info.json", "README.md"):
            assert (tmp_path / f"k{reject}" / name).read_bytes() == (tmp_path / f"l{reject}" / name).read_bytes()
    assert streamed["trajectories"] == n and streamed["exported"] == sum(_traj(i).finish_reason == "answered"
                                                                         for i in range(n))


# ----------------------------------------------------------------------------- through the pipeline

def _curator(messages: list[Message], **kw: Any) -> Any:
    rf = kw.get("response_format") or {}
    name = rf.get("json_schema", {}).get("name")
    text = " ".join(m.content or "" for m in messages)
    if name == "qa_pair" and "Junk" in text:
        return "no JSON here"
    if name == "distractor_documents" and "Junk" in text:
        return "not JSON either"
    if name == "qa_pair" and "Leak" in text:
        out = json.loads(curator_reply(messages, **kw))
        out["question"] += " Was it 1901?"
        return json.dumps(out)
    if name == "behaviour_tag" and ("Odd" in text or "Stray Two" in text):  # Odd's paths state 1901 only in K~
        return json.dumps({"tag": "heroic", "rationale": "?"})
    return curator_reply(messages, **kw)


def _teacher(messages: list[Message], **kw: Any) -> Any:
    question = next((m.content or "" for m in messages if m.role == "user"), "")
    done = any(m.role == "tool" for m in messages)
    if "Long" in question:
        raise ContextLimitError("prompt of 40000 tokens over the 32768 window")
    if "Wrong" in question and done:
        return "It was finished in 1850. <answer>1850</answer>"
    if "Bare" in question and done:
        return "1901"
    if "Stray" in question and not any(m.role == "assistant" for m in messages):
        return ToolCall(name="no_such_tool", arguments={})
    return teacher_reply(messages, **kw)


def test_pipeline_statistics_and_export_equal_the_list_code(tmp_path: Path) -> None:
    """A scripted run with rejections at every stage the fakes can reach: its ``metrics.json``
    statistics and SFT files (streamed from the stage files) equal the list-based code's."""
    def kb_tilde(passages: list[Passage]) -> FakeRetriever:
        return FakeRetriever(passages, kb="distractor")

    comps = RagShaperComponents(curator=ScriptedLLM(default=_curator), teacher=ScriptedLLM(default=_teacher),
                                main_kb=main_retriever(), distractor_kb=kb_tilde,
                                tagger=ScriptedLLM(default=_curator))
    cfg = RagShaperConfig()
    cfg.curator.max_depth = 4
    seeds = [f"Ada Varn {w}" for w in ("", "Junk", "Leak", "Odd", "Long", "Wrong", "Bare", "Stray", "Stray Two")]
    m = ShaperRun(tmp_path / "run", cfg, comps).run(seeds)
    with RunDir(tmp_path / "run", lock=False) as run:
        recs = {k: run.stage_file(f, model).read() for k, f, model in [
            ("trees", "trees", InfoTree), ("distractors", "distractors", DistractorDoc), ("paths", "paths", PathRecord),
            ("qas", "qa", QARecord), ("trajs", "trajectories", Trajectory), ("filters", "filter", FilterRecord),
            ("tags", "tags", TagRecord)]}
    kept_ids = {f.id for f in recs["filters"] if f.kept}
    kept = [t for t in recs["trajs"] if t.id in kept_ids]
    dirty = {t.id for t in kept if malformed_turns(t)}
    export = {"malformed_turns": "reject", "with_malformed_turns": len(dirty)}
    counts, details = json.loads(_reference(recs, len(seeds), cfg, {**export, "exported": m["export"]["exported"]}))
    assert {k: m[k] for k in details} == details
    funnel = {f["stage"]: f for f in m["funnel"]}
    for stage, (n_in, n_out, rejected) in counts.items():
        assert (funnel[stage]["in"], funnel[stage]["out"], funnel[stage]["rejected"]) == (n_in, n_out, rejected)
    for stage in ("distractors", "qa", "elicit", "filter", "tag", "export"):
        assert funnel[stage]["rejected"], stage
    assert dirty and m["export"]["exported"] == len(kept) - len(dirty) > 0
    sft = json.loads((tmp_path / "run" / "sft" / "trl_sft.jsonl").read_text().splitlines()[0])
    write_sft_export(tmp_path / "lists", [t for t in kept if t.id not in dirty], sft["messages"][0]["content"],
                     sft["tools"])
    for name in ("trl_sft.jsonl", "sharegpt.jsonl", "dataset_info.json", "README.md"):
        assert (tmp_path / "run" / "sft" / name).read_bytes() == (tmp_path / "lists" / name).read_bytes(), name
