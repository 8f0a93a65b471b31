"""EviPath end to end with the gold-data fake (MuSiQue's own decompositions), resume after an
outage, the deductive mode, exports (load_dataset + assistant-only masking) and the
planner_executor agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrag.agents import build_agent
from agentrag.errors import LLMError
from agentrag.records import Passage, QAItem
from agentrag.synth.evipath import EviPathRunConfig, run_evipath
from agentrag.synth.evipath.schema import ConversationRecord, GateRecord, SelectionRecord
from agentrag.testing import FakeRetriever, ScriptedLLM
from evipath_fakes import CleanGoldLLM as GoldDecompositionLLM
from evipath_fakes import ContentWordEmbedder
from extras_check import require_module

N = 6


@pytest.fixture(scope="module")
def musique(data_dir: Path) -> Path:
    return data_dir / "musique" / "train_100.jsonl"


@pytest.fixture(scope="module")
def records(musique: Path) -> list[dict]:
    return [json.loads(line) for line in musique.read_text().splitlines()[:N]]


def _run(path: Path, llm, musique: Path, *, concurrency: int = 2, **cfg) -> dict:
    retriever = cfg.pop("retriever", None)
    given = {"retriever": retriever} if retriever is not None else {}
    run_cfg = EviPathRunConfig(datasets=[str(musique)], limit=N, concurrency=concurrency, **cfg)
    return run_evipath(run_cfg, path, planner=llm, embedder=ContentWordEmbedder(), **given)


def test_gold_fake_produces_gate_passing_planner_and_executor_records(tmp_path: Path, records, musique: Path):
    llm = GoldDecompositionLLM(records)
    m = _run(tmp_path / "run", llm, musique)
    gates = [GateRecord.model_validate_json(x) for x in (tmp_path / "run" / "gates.jsonl").read_text().splitlines()]
    assert len(gates) == N and all(g.passed for g in gates), [g.reasons for g in gates]
    convs = [ConversationRecord.model_validate_json(x)
             for x in (tmp_path / "run" / "conversations.jsonl").read_text().splitlines()]
    planners = [c for c in convs if c.role == "planner"]
    executors = [c for c in convs if c.role == "executor"]
    assert len(planners) == N and len(executors) == sum(g.n_subquestions for g in gates)
    # planner: system, question, then alternating assistant / observation turns, ending with the answer
    p = planners[0].messages
    assert [x.role for x in p[:3]] == ["system", "user", "assistant"] and p[-1].role == "assistant"
    assert "<answer>" in p[-1].content and all(x.content.startswith("Observation:") for x in p[3:-1:2])
    assert "<action>" in p[2].content and 'Search("' in p[2].content
    # executor: think / select / answer over what the agent's executor is shown (its top_k 5 paragraphs,
    # the gold one in), select = the gold positions
    sels = {s.id: s for s in (SelectionRecord.model_validate_json(x)
                             for x in (tmp_path / "run" / "selections.jsonl").read_text().splitlines())}
    e = executors[0]
    assert e.messages[1].content.count("\n[") == 5
    assert f"<select> [{', '.join(map(str, sels[e.id.removesuffix('-executor')].gold_positions))}] </select>" \
        in e.messages[2].content
    # report numbers
    funnel = {r["stage"]: r for r in m["funnel"]}
    assert list(funnel) == ["items", "plans", "paths", "sub_answers", "selections", "gates", "conversations",
                            "export"]
    assert funnel["gates"]["out"] == N and all(r["unfinished"] == 0 for r in m["funnel"])
    assert funnel["export"]["out"] == m["export"]["exported"] == len(planners) + len(executors)
    assert m["unfinished"] == 0 and m["bugs"] == 0 and m["synthesizer"] == "evipath" and m["wall_s"] >= 0
    assert sum(m["subquestions_per_item"].values()) == N and m["eq6_fallback_rate"] is not None
    assert m["llm_per_item"]["calls"] > 3 and (tmp_path / "run" / "report.md").exists()
    # every record has provenance with the model and (for LLM stages) a prompt hash and raw output
    for stage in ("plans", "iterations", "sub_answers", "selections"):
        for line in (tmp_path / "run" / f"{stage}.jsonl").read_text().splitlines():
            prov = json.loads(line)["provenance"]
            assert prov["model"] == "gold-decomposition" and prov["prompt_hash"] and prov["raw_output"]


def test_parallel_actions_from_independent_sub_questions(tmp_path: Path, musique: Path):
    # a 2-hop chain and a 3hop2 item whose #1 and #2 are independent: [[0, 1], [2]]
    rows = [json.loads(x) for x in musique.read_text().splitlines()]
    picked = [rows[0], next(r for r in rows if r["id"] == "3hop2__130734_798404_834843")]
    ds = tmp_path / "two.jsonl"
    ds.write_text("".join(json.dumps(r) + "\n" for r in picked))
    m = run_evipath(EviPathRunConfig(datasets=[str(ds)], concurrency=1), tmp_path / "run",
                    planner=GoldDecompositionLLM(picked), embedder=ContentWordEmbedder())
    assert m["actions"] == {"sequential (1 sub-question)": 3, "parallel (>1 sub-questions)": 1}
    its = [json.loads(x) for x in (tmp_path / "run" / "iterations.jsonl").read_text().splitlines()]
    par = next(i for i in its if len(i["actions"]) > 1)
    assert par["item_id"] == picked[1]["id"] and par["n"] == 1 and len(par["observations"]) == 2


class Flaky:
    """The gold fake with an outage (retryable LLMError) on the calls numbered in ``down``."""

    def __init__(self, inner, down):
        self.inner, self.down, self.model, self.n = inner, set(down), inner.model, 0

    def chat(self, messages, **kw):
        self.n += 1
        if self.n in self.down:
            raise LLMError("503 after retries", is_retryable=True)
        return self.inner.chat(messages, **kw)


def test_outage_leaves_items_unfinished_and_rerun_resumes(tmp_path: Path, records, musique: Path):
    out = tmp_path / "run"
    flaky = Flaky(GoldDecompositionLLM(records), down={3, 12, 30})
    lexical = {"gates": {"verifier": "none"}}  # resume is counted in synthesis calls (no verifier calls)
    m1 = _run(out, flaky, musique, **lexical)
    assert m1["unfinished"] >= 1 and sum(m1["unfinished_by_stage"].values()) == m1["unfinished"]
    assert set(m1["unfinished_by_stage"]) <= {"paths", "selections"}
    assert sum(r["unfinished"] for r in m1["funnel"]) == m1["unfinished"]
    gated1 = len((out / "gates.jsonl").read_text().splitlines())
    assert gated1 < N
    again = GoldDecompositionLLM(records)
    m2 = _run(out, again, musique, **lexical)
    assert m2["unfinished"] == 0 and m2["unfinished_by_stage"] == {}
    assert again.calls < flaky.n  # finished items were not redone
    for stage in ("plans", "iterations", "sub_answers", "selections", "gates", "conversations"):
        ids = [json.loads(x)["id"] for x in (out / f"{stage}.jsonl").read_text().splitlines()]
        assert len(ids) == len(set(ids)), stage
    gates = [json.loads(x) for x in (out / "gates.jsonl").read_text().splitlines()]
    assert len(gates) == N and all(g["passed"] for g in gates)
    third = GoldDecompositionLLM(records)
    _run(out, third, musique, **lexical)
    assert third.calls == 0  # everything done: nothing is paid again


def test_kill_mid_run_keeps_what_was_written(tmp_path: Path, records, musique: Path):
    out = tmp_path / "run"

    class Killer(GoldDecompositionLLM):
        def chat(self, messages, **kw):
            if self.calls >= 25:
                raise KeyboardInterrupt
            return super().chat(messages, **kw)

    with pytest.raises(KeyboardInterrupt):
        _run(out, Killer(records), musique, concurrency=1)
    done = {json.loads(x)["item_id"] for x in (out / "iterations.jsonl").read_text().splitlines()
            if json.loads(x)["last"]}
    assert 1 <= len(done) < N
    again = GoldDecompositionLLM(records)
    _run(out, again, musique)
    assert len((out / "gates.jsonl").read_text().splitlines()) == N
    fresh = GoldDecompositionLLM(records)
    _run(tmp_path / "fresh", fresh, musique)
    assert again.calls < fresh.calls  # the items finished before the kill were not redone
    first_ids = [json.loads(x)["id"] for x in (out / "iterations.jsonl").read_text().splitlines()]
    assert len(first_ids) == len(set(first_ids))


def test_deductive_mode_runs_the_agent_on_the_kb(tmp_path: Path, records, musique: Path):
    passages = [Passage(id=f"{r['id']}-{p['idx']}", title=p["title"], text=p["paragraph_text"])
                for r in records for p in r["paragraphs"]]
    m = _run(tmp_path / "run", GoldDecompositionLLM(records), musique, mode="deductive",
             retriever=FakeRetriever(passages), agent_top_k=3)
    funnel = {r["stage"]: r for r in m["funnel"]}
    assert funnel["paths"]["in"] == N and funnel["gates"]["in"] == N
    gates = [json.loads(x) for x in (tmp_path / "run" / "gates.jsonl").read_text().splitlines()]
    assert all(g["checks"]["final_answer"] for g in gates)  # the fake knows the answers
    # no LLM call saw the gold answer as such: no abductive prompts in deductive mode
    plans = [json.loads(x) for x in (tmp_path / "run" / "plans.jsonl").read_text().splitlines()]
    assert all(p["provenance"]["model"].startswith("deductive:") for p in plans)
    sels = [json.loads(x) for x in (tmp_path / "run" / "selections.jsonl").read_text().splitlines()]
    assert sels and all(len(s["evidence"]) <= 3 for s in sels)
    no_gold = {s["item_id"] for s in sels if s["reason"] and s["reason"].startswith("no_gold_retrieved")}
    for g in gates:  # every failed check has its reason; a sub-question that retrieved no gold fails select
        assert g["passed"] == all(g["checks"].values())
        assert sorted(r.split(":")[0] for r in g["reasons"]) == sorted(k for k, v in g["checks"].items() if not v)
        assert (g["id"] not in no_gold) or not g["checks"]["select_subset"]


@pytest.mark.parametrize("split,roles", [("planner", {"planner"}), ("executor", {"executor"}),
                                         ("both", {"planner", "executor"})])
def test_export_splits_load_with_datasets(tmp_path: Path, records, musique: Path, split, roles):
    require_module("datasets", "train")
    from datasets import load_dataset

    _run(tmp_path / "run", GoldDecompositionLLM(records), musique, split=split)
    sft = tmp_path / "run" / "sft"
    ds = load_dataset(str(sft), split="train", cache_dir=str(tmp_path / "hf_cache"))
    systems = {r["messages"][0]["content"][:20] for r in ds}
    assert len(systems) == len(roles)
    assert all(m["role"] in ("system", "user", "assistant") for r in ds for m in r["messages"])
    info = json.loads((sft / "dataset_info.json").read_text())
    (name, entry), = info.items()
    assert name == f"agentrag_evipath_{split}" and entry["formatting"] == "sharegpt"
    share = [json.loads(x) for x in (sft / "sharegpt.jsonl").read_text().splitlines()]
    assert len(share) == len(ds) and all(t["from"] in ("human", "gpt") for r in share for t in r["conversations"])
    assert all(r["conversations"][0]["from"] == "human" and r["conversations"][-1]["from"] == "gpt" for r in share)


def test_export_masks_only_non_assistant_tokens(tmp_path: Path, records, musique: Path):
    require_module("transformers", "train")
    require_module("trl", "train")
    from agentrag.export.masking import assistant_mask, render
    from agentrag.testing import chatml_byte_tokenizer

    tok = chatml_byte_tokenizer()
    _run(tmp_path / "run", GoldDecompositionLLM(records), musique)
    rows = [json.loads(x) for x in (tmp_path / "run" / "sft" / "trl_sft.jsonl").read_text().splitlines()]
    for rec in [rows[0], next(r for r in rows if len(r["messages"]) == 3)]:  # a planner and an executor chat
        toks = assistant_mask(rec, tok)
        text = render(rec, tok)
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert enc["input_ids"] == toks.input_ids
        cursor = 0
        for msg in rec["messages"]:
            lo = text.index(msg["content"], cursor)
            hi = cursor = lo + len(msg["content"])
            covered = [m for (a, b), m in zip(enc["offset_mapping"], toks.assistant_mask) if a < hi and b > lo and b > a]
            assert covered
            assert all(covered) if msg["role"] == "assistant" else not any(covered), msg["role"]
        trained = tok.decode([t for t, m in zip(toks.input_ids, toks.assistant_mask) if m])
        assert "Observation:" not in trained and "Supporting evidence" not in trained and "<think>" in trained


# --- the planner_executor agent ---------------------------------------------------------------


def test_planner_executor_agent_parallel_searches_and_observations():
    import threading

    passages = [Passage(id="a", title="Film A", text="Film A was directed by Ann Lee. " + "More words. " * 80),
                Passage(id="b", title="Film B", text="Film B was directed by Bob Ray."),
                Passage(id="c", title="Ann Lee", text="Ann Lee was born in 1950.")]
    planner = ScriptedLLM([
        '<think>Both directors.</think><action>Search("Who directed Film A?")\nSearch("Who directed Film B?")</action>',
        '<think>Ann Lee.</think><action>Search("When was Ann Lee born?")\nSearch("When was Bob Ray born?")</action>',
        "<think>Done.</think><answer>Film A</answer>"])
    together = threading.Barrier(2, timeout=10)  # the two executor calls of turn 1 must be in flight at once
    replies = {"Who directed Film A?": "Ann Lee directed Film A.", "Who directed Film B?": "Bob Ray directed Film B.",
               "When was Ann Lee born?": "Ann Lee was born in 1950."}

    def execute(messages, **kw):
        q = messages[1].content.splitlines()[0].removeprefix("Question: ")
        if q.startswith("Who directed"):
            together.wait()
        return f"<think>[0] says so</think><select>[0]</select><answer>{replies[q]}</answer>"

    executor = ScriptedLLM(default=execute)
    agent = build_agent("planner_executor", planner, FakeRetriever(passages), top_k=2, max_searches=3)
    agent.executor_llm = executor
    traj = agent.run(QAItem(id="1", question="Which film has the older director, Film A or Film B?",
                            golden_answers=["Film A"]))
    assert traj.finish_reason == "answered" and traj.answer == "Film A"
    searches = [s for s in traj.steps if s.action is not None]
    assert [s.action.arguments["query"] for s in searches] == ["Who directed Film A?", "Who directed Film B?",
                                                              "When was Ann Lee born?"]
    assert all(len(s.hits) == 2 for s in searches) and traj.metadata["topk_per_step"] == [2, 2, 2]
    obs = [m.content for m in traj.messages if m.role == "user" and m.content.startswith("Observation:")]
    assert obs[0] == "Observation:\nAnn Lee directed Film A.\nBob Ray directed Film B."
    assert obs[1].startswith("Observation:\nAnn Lee was born in 1950.\nNot searched (the budget of 3 searches is "
                             "used up): When was Bob Ray born?\n\nYou have used your search budget.")
    ex_user = next(r["messages"][1].content for r in executor.requests
                   if r["messages"][1].content.startswith("Question: Who directed Film A?"))
    assert "[0] Film A: Film A was directed" in ex_user and ex_user.count("More words.") == 80  # whole passage
    assert traj.usage.calls == 6


def test_planner_executor_agent_forces_an_answer_and_reports_parse_errors():
    planner = ScriptedLLM(default='<think>more</think><action>Search("Who?")</action>')
    agent = build_agent("planner_executor", planner, FakeRetriever([Passage(id="a", text="x")]), max_steps=2)
    agent.executor_llm = ScriptedLLM(default="<think>t</think><select>[]</select><answer>No relevant information "
                                             "found.</answer>")
    traj = agent.run(QAItem(id="1", question="q?", golden_answers=["a"]))
    assert traj.finish_reason == "max_steps" and "final answer now" in planner.requests[1]["messages"][-1].content
    bad = build_agent("planner_executor", ScriptedLLM(default="rambling"), FakeRetriever([]), max_format_errors=2)
    assert bad.run(QAItem(id="1", question="q?", golden_answers=["a"])).finish_reason == "parse_error"


def test_deductive_mode_reraises_llm_errors_the_agent_swallowed(tmp_path: Path, records, musique: Path):
    from agentrag.errors import ContextLimitError

    passages = [Passage(id=f"{r['id']}-{p['idx']}", title=p["title"], text=p["paragraph_text"])
                for r in records for p in r["paragraphs"]]

    class Failing(GoldDecompositionLLM):
        def __init__(self, records, exc):
            super().__init__(records)
            self.exc = exc

        def chat(self, messages, **kw):
            if self.exc is not None and records[0]["question"] in messages[1].content:
                raise self.exc
            return super().chat(messages, **kw)

    first = records[0]["id"]
    out = tmp_path / "outage"
    m = _run(out, Failing(records, LLMError("503", is_retryable=True)), musique, mode="deductive",
             retriever=FakeRetriever(passages), agent_top_k=3)
    assert m["unfinished_by_stage"] == {"paths": 1} and first in m["unfinished_items"]
    assert first not in {json.loads(x)["id"] for x in (out / "gates.jsonl").read_text().splitlines()}
    with pytest.raises(LLMError, match="401"):  # no retry fixes it: the run stops
        _run(tmp_path / "fatal", Failing(records, LLMError("401", is_retryable=False)), musique, mode="deductive",
             retriever=FakeRetriever(passages), agent_top_k=3)
    m = _run(tmp_path / "ctx", Failing(records, ContextLimitError("9098 > 8192")), musique, mode="deductive",
             retriever=FakeRetriever(passages), agent_top_k=3)
    assert m["unfinished"] == 0 and {r["stage"]: r for r in m["funnel"]}["paths"]["rejected"].get("context_limit") == 1


def test_the_funnel_adds_up_within_each_unit(tmp_path: Path, records, musique: Path):
    """Each stage's in is the out above it; where the counted thing changes (items -> sub-questions
    -> conversations) the row's unit says so, and the counts follow from the paths."""
    m = _run(tmp_path / "run", GoldDecompositionLLM(records), musique)
    rows = m["funnel"]
    assert [r["unit"] for r in rows] == ["items", "items", "items", "sub-questions", "sub-questions", "items",
                                         "conversations", "conversations"]
    for above, row in zip(rows, rows[1:]):
        if row["unit"] == above["unit"]:
            assert row["in"] == above["out"] - row["unfinished"], (above, row)
    f = {r["stage"]: r for r in rows}
    n_sub = sum(int(k) * v for k, v in m["subquestions_per_item"].items())
    assert f["sub_answers"]["in"] == n_sub and f["conversations"]["in"] == f["gates"]["out"] + n_sub
    assert "0" not in m["subquestions_per_item"]
    from agentrag.report.viewer.common import funnel_table

    table = funnel_table(m)
    assert table is not None and "counts" in str(table)
