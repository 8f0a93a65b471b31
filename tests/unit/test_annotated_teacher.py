"""The human-annotation teacher: hops from annotations, gates both ways, the run through the driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrag.errors import UserError
from agentrag.records import Hit, Passage, QAItem
from agentrag.synth.annotated import AnnotatedRunConfig, run_annotated
from agentrag.synth.annotated.gates import (
    annotation_gate,
    first_failure,
    grounded_gate,
    leakage_gate,
    support_gate,
)
from agentrag.synth.annotated.teacher import Hop, SearchedHop, musique_hops, twowiki_hops
from agentrag.testing import FakeRetriever

MUSIQUE = {
    "id": "m1", "question": "Where was the spouse of Ada Lark born?", "answer": "Vienna", "answer_aliases": [],
    "answerable": True,
    "paragraphs": [
        {"idx": 0, "title": "Ada Lark", "paragraph_text": "Ada Lark was married to Bruno Kess, a painter.",
         "is_supporting": True},
        {"idx": 1, "title": "Bruno Kess", "paragraph_text": "Bruno Kess was born in Vienna in 1901.",
         "is_supporting": True},
        {"idx": 2, "title": "Other", "paragraph_text": "An unrelated paragraph about rivers.",
         "is_supporting": False},
    ],
    "question_decomposition": [
        {"id": 1, "question": "Ada Lark >> spouse", "answer": "Bruno Kess", "paragraph_support_idx": 0},
        {"id": 2, "question": "Where was #1 born?", "answer": "Vienna", "paragraph_support_idx": 1},
    ],
}
TWOWIKI = {
    "_id": "w1", "type": "comparison", "question": "Are Ada Lark and Bruno Kess of the same nationality?",
    "answer": "no",
    "context": [["Ada Lark", ["Ada Lark was married to Bruno Kess, a painter.", "She was French."]],
                ["Bruno Kess", ["Bruno Kess was born in Vienna in 1901.", "He was Austrian."]]],
    "supporting_facts": [["Ada Lark", 1], ["Bruno Kess", 1]],
    "evidences": [["Ada Lark", "country of citizenship", "France"], ["Bruno Kess", "country of citizenship", "Austria"]],
}


def _passages() -> list[Passage]:
    return [Passage(id="p0", title="Ada Lark", text="Ada Lark was married to Bruno Kess, a painter. She was French."),
            Passage(id="p1", title="Bruno Kess", text="Bruno Kess was born in Vienna in 1901. He was Austrian."),
            Passage(id="p2", title="Other", text="An unrelated paragraph about rivers.")]


def _write(tmp: Path, name: str, rows: list[dict]) -> str:
    p = tmp / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


def _item(q: str, a: str) -> QAItem:
    return QAItem(id="x", question=q, golden_answers=[a])


def _sh(query: str, answer: str, support: str, hits: list[tuple[str, str]]) -> SearchedHop:
    hs = [Hit(id=str(i), title=t, text=x, score=1.0) for i, (t, x) in enumerate(hits)]
    obs = "\n".join(f"Doc {i + 1} (Title: {t}) {x}" for i, (t, x) in enumerate(hits))
    return SearchedHop(Hop(query, answer, [support]), obs, hs)


def test_musique_hops_resolve_references_and_arrows() -> None:
    item = QAItem(id="m", question="q", golden_answers=["Vienna"],
                  metadata={"source": "musique", "decomposition": MUSIQUE["question_decomposition"]})
    hops = musique_hops(item, {0: "Ada Lark", 1: "Bruno Kess"})
    assert [h.query for h in hops] == ["Who is the spouse of Ada Lark?", "Where was Bruno Kess born?"]
    assert [h.support for h in hops] == [["Ada Lark"], ["Bruno Kess"]]


def test_twowiki_hops_from_triples() -> None:
    item = QAItem(id="w", question="q", golden_answers=["no"],
                  metadata={"source": "2wiki", "evidences": TWOWIKI["evidences"],
                            "supporting_titles": ["Ada Lark", "Bruno Kess"]})
    hops = twowiki_hops(item)
    assert hops[1].query == "Which country is Bruno Kess a citizen of?"
    assert hops[1].answer == "Austria" and hops[1].support == ["Bruno Kess"]


def test_annotation_gate_rejects_bad_and_keeps_good() -> None:
    assert annotation_gate([], 4).startswith("annotation:")
    assert "unresolved" in annotation_gate([Hop("Where was #3 born?", "x", ["t"])], 4)
    assert "no supporting" in annotation_gate([Hop("Who?", "x", [])], 4)
    assert "max_hops" in annotation_gate([Hop("q", "a", ["t"])] * 5, 4)
    assert annotation_gate([Hop("Who is Ada?", "a", ["t"])], 4) is None


def test_support_gate_needs_the_supporting_title_retrieved() -> None:
    bad = _sh("Where was Bruno born?", "Vienna", "Bruno Kess", [("Other", "rivers")])
    good = _sh("Where was Bruno born?", "Vienna", "Bruno Kess", [("Bruno Kess", "born in Vienna")])
    assert support_gate([bad]).startswith("support_retrieved:")
    assert support_gate([good]) is None


def test_leakage_gate() -> None:
    leak = _sh("Is Vienna where Bruno was born?", "Vienna", "Bruno Kess", [("Bruno Kess", "born in Vienna")])
    assert leakage_gate("Where was Bruno born?", "Vienna", [leak]).startswith("no_leakage:")
    # the answer in a later query after a document showed it: fine
    first = _sh("Where was Bruno born?", "Vienna", "Bruno Kess", [("Bruno Kess", "born in Vienna")])
    later = _sh("What river is in Vienna?", "Danube", "Vienna", [("Vienna", "Vienna on the Danube")])
    assert leakage_gate("Where was Bruno born?", "Vienna", [first, later]) is None
    # comparison: the answer is named in the question
    comp = _sh("When was Blonde Ice directed?", "1948", "Blonde Ice", [("Blonde Ice", "1948 film")])
    assert leakage_gate("Which film came first, Blonde Ice or Shadow?", "Blonde Ice", [comp]) is None


def test_grounded_gate_keeps_yes_no_comparison_and_found_answers() -> None:
    sh = _sh("Where was Bruno born?", "Vienna", "Bruno Kess", [("Bruno Kess", "born in Vienna")])
    assert grounded_gate("Where was Bruno born?", "Vienna", [sh]) is None
    assert grounded_gate("Same nationality?", "no", [sh]) is None
    assert grounded_gate("Who came first, Ada or Bruno?", "Bruno", [sh]) is None
    assert grounded_gate("Where was Bruno born?", "Graz", [sh]).startswith("answer_grounded:")
    assert first_failure("Where was Bruno born?", "Graz", [sh.hop], [sh], 4).startswith("answer_grounded")


def test_run_through_driver_writes_react_sft_and_funnel(tmp_path: Path) -> None:
    bad = dict(MUSIQUE, id="m2", question_decomposition=[
        {"id": 1, "question": "Who was born in #4?", "answer": "x", "paragraph_support_idx": 0}])
    files = [_write(tmp_path, "mus_train.jsonl", [MUSIQUE, bad]), _write(tmp_path, "wiki_train.jsonl", [TWOWIKI])]
    retriever = FakeRetriever(_passages())
    cfg = AnnotatedRunConfig(datasets=files, top_k=2)
    m = run_annotated(cfg, tmp_path / "out", retriever=retriever)
    funnel = {r["stage"]: r for r in m["funnel"]}
    assert funnel["items"]["in"] == 3 and funnel["items"]["rejected"] == {"annotation": 1}
    assert funnel["gates"]["out"] == 2 and m["llm"] == {}
    recs = [json.loads(x) for x in (tmp_path / "out" / "sft" / "trl_sft.jsonl").read_text().splitlines()]
    msgs = recs[0]["messages"]
    from agentrag.agents.react import react_system_prompt
    from agentrag.agents.tools import search_tool_schema

    assert msgs[0]["content"] == react_system_prompt() and recs[0]["tools"] == [search_tool_schema(default_k=2)]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert msgs[2]["tool_calls"][0]["function"]["arguments"] == {"query": "Who is the spouse of Ada Lark?"}
    assert "Bruno Kess was born in Vienna" in msgs[5]["content"]  # the KB's document, not the annotation
    assert msgs[-1]["content"] == "<answer>Vienna</answer>"
    # rerun resumes: nothing searched again
    calls = retriever.calls
    run_annotated(cfg, tmp_path / "out", retriever=retriever)
    assert retriever.calls == calls


def test_refuses_dev_files_and_other_formats(tmp_path: Path) -> None:
    dev = _write(tmp_path, "dev_x.jsonl", [MUSIQUE])
    with pytest.raises(UserError, match="evaluation file"):
        run_annotated(AnnotatedRunConfig(datasets=[dev]), tmp_path / "o", retriever=FakeRetriever(_passages()))
    flash = _write(tmp_path, "train_flash.jsonl", [{"id": "1", "question": "q", "golden_answers": ["a"]}])
    with pytest.raises(UserError, match="format"):
        run_annotated(AnnotatedRunConfig(datasets=[flash]), tmp_path / "o", retriever=FakeRetriever(_passages()))


COMPACT = "Search with `{tool}`; answer inside <answer></answer>."


def _records(out: Path, sub: str = "sft") -> list[dict]:
    return [json.loads(x) for x in (out / sub / "trl_sft.jsonl").read_text().splitlines()]


def test_forced_record_inserts_the_agents_forced_turn_and_drops_tools() -> None:
    from agentrag.agents.prompts import REACT_FORCE_ANSWER
    from agentrag.synth.annotated.teacher import forced_record

    rec = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0"}]},
                        {"role": "tool", "content": "Doc 1"}, {"role": "assistant", "content": "<answer>a</answer>"}],
           "tools": [{"type": "function"}]}
    out = forced_record(rec)
    assert [m["role"] for m in out["messages"]] == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert out["messages"][4]["content"] == REACT_FORCE_ANSWER and out["tools"] == []
    assert rec["messages"][-2]["role"] == "tool"  # the input is not modified
    with pytest.raises(ValueError, match="answer turn"):
        forced_record({"messages": rec["messages"][:-1], "tools": []})


def test_forced_share_splits_paths_stably(tmp_path: Path) -> None:
    from agentrag.synth.annotated.teacher import is_forced

    ids = [f"id{i}" for i in range(400)]
    assert not any(is_forced(i, 0.0) for i in ids) and all(is_forced(i, 1.0) for i in ids)
    half = [i for i in ids if is_forced(i, 0.5)]
    assert 150 < len(half) < 250 and half == [i for i in ids if is_forced(i, 0.5)]


def test_compact_protocol_records_are_what_the_react_agent_sends(tmp_path: Path) -> None:
    """Teacher records (free and forced form) equal, turn for turn, the requests the react agent
    makes with the same settings (system prompt, top_k, doc_chars), so SFT trains on the eval prompt."""
    from agentrag.agents import build_agent
    from agentrag.agents.config import ReactConfig
    from agentrag.export.sft import message_dict
    from agentrag.llm.base import Completion
    from agentrag.records import ToolCall
    from agentrag.testing import ScriptedLLM

    files = [_write(tmp_path, "mus_train.jsonl", [MUSIQUE])]
    long_p = [Passage(id=p.id, title=p.title, text=p.text + " Filler words follow here." * 20) for p in _passages()]
    for share, out in ((0.0, tmp_path / "free"), (1.0, tmp_path / "forced")):
        cfg = AnnotatedRunConfig(datasets=files, top_k=2, doc_chars=60, system_prompt=COMPACT, forced_share=share)
        m = run_annotated(cfg, out, retriever=FakeRetriever(long_p))
        assert m["export"]["forced_answer"] == (1 if share else 0)
        (rec,) = _records(out)
        msgs = rec["messages"]
        assert msgs[0]["content"] == COMPACT.format(tool="dense_search")
        obs = msgs[3]["content"]
        assert "..." in obs and all(len(line) < 60 + 40 for line in obs.splitlines())  # cut documents
        turns = [(m["content"], m["tool_calls"][0]["function"]["arguments"]["query"]) for m in msgs
                 if m.get("tool_calls")]
        # the agent with the same settings, scripted to search the same queries then answer
        agent_cfg = ReactConfig(top_k=2, doc_chars=60, system_prompt=COMPACT, max_steps=len(turns) + (1 if share else 2))
        llm = ScriptedLLM([Completion(text=t or None, finish_reason="tool_calls", tool_calls=[
            ToolCall(id=f"call_{i}", name="dense_search", arguments={"query": q})]) for i, (t, q) in enumerate(turns)]
            + ["<answer>Vienna</answer>"])
        build_agent("react", llm, FakeRetriever(long_p), agent_cfg).run(
            QAItem(id="m1", question=MUSIQUE["question"], golden_answers=["Vienna"]))
        last = llm.requests[-1]
        sent = [message_dict(x) for x in last["messages"]]
        if share:  # the agent's last turn is the forced one: same messages, no tools
            assert last["tools"] is None and rec["tools"] == []
            assert sent == msgs[:-1]
        else:  # free form: the agent would answer at this turn with the tool offered
            assert last["tools"] == rec["tools"] and sent == msgs[:-1]
    # sharegpt holds the free form only (LLaMA-Factory has no user turn after an observation)
    assert (tmp_path / "forced" / "sft" / "sharegpt.jsonl").read_text() == ""


def test_planner_executor_conversations_parse_with_the_agents_protocol(tmp_path: Path) -> None:
    from agentrag.agents.pe_protocol import (
        EXECUTOR_SYSTEM,
        PLANNER_SYSTEM,
        executor_user,
        parse_executor,
        parse_planner,
    )
    from agentrag.agents.planner_executor import passage_text

    files = [_write(tmp_path, "mus_train.jsonl", [MUSIQUE]), _write(tmp_path, "wiki_train.jsonl", [TWOWIKI])]
    retriever = FakeRetriever(_passages())
    m = run_annotated(AnnotatedRunConfig(datasets=files, top_k=2, doc_chars=80), tmp_path / "out", retriever=retriever)
    pe = m["export"]["planner_executor"]
    # the 2Wiki path's citizenship hop is stated only as "French": EviPath's sub_answer_support would
    # reject its executor chat, so the path is left out of this export (counted), not exported failing
    assert pe["planner_conversations"] == 1 and pe["executor_conversations"] == 2 and pe["exported"] == 3
    assert pe["dropped"] == {"sub_answer_support": 1}
    chats = [json.loads(x)["messages"] for x in
             (tmp_path / "out" / "sft_planner_executor" / "trl_sft.jsonl").read_text().splitlines()]
    planner = next(c for c in chats if c[0]["content"] == PLANNER_SYSTEM and "spouse" in c[1]["content"])
    turns = [parse_planner(x["content"]) for x in planner if x["role"] == "assistant"]
    assert [t.searches for t in turns[:-1]] == [["Who is the spouse of Ada Lark?"], ["Where was Bruno Kess born?"]]
    assert turns[-1].answer == "Vienna" and not turns[-1].searches and all(t.error is None for t in turns)
    assert planner[3]["content"].startswith("Observation:\n") and "Bruno Kess" in planner[3]["content"]
    execs = [c for c in chats if c[0]["content"] == EXECUTOR_SYSTEM]
    born = next(c for c in execs if "Where was Bruno Kess born?" in c[1]["content"])
    (hits,) = retriever.search(["Where was Bruno Kess born?"], 2)
    assert born[1]["content"] == executor_user("Where was Bruno Kess born?", [passage_text(h, 80) for h in hits])
    out = parse_executor(born[2]["content"])
    assert out.error is None and out.select == [i for i, h in enumerate(hits) if h.title == "Bruno Kess"]
    assert "Vienna" in (out.answer or "")
    # off: no planner_executor export
    m2 = run_annotated(AnnotatedRunConfig(datasets=files, top_k=2, planner_executor=False), tmp_path / "o2",
                       retriever=FakeRetriever(_passages()))
    assert "planner_executor" not in m2["export"] and not (tmp_path / "o2" / "sft_planner_executor").exists()


def test_reason_ground_records_are_what_the_reason_ground_agent_sends(tmp_path: Path) -> None:
    """The teacher's reason_ground records (one chat per round) equal the requests the
    reason_ground agent makes, with the same top_k and doc_chars, when a scripted model writes the
    records' steps; each step parses to the action the round needs (query, evidence, answer)."""
    from agentrag.agents import build_agent
    from agentrag.agents.config import ReasonGroundConfig
    from agentrag.agents.reason_ground import parse_step
    from agentrag.export.sft import message_dict
    from agentrag.testing import ScriptedLLM

    files = [_write(tmp_path, "mus_train.jsonl", [MUSIQUE])]
    long_p = [Passage(id=p.id, title=p.title, text=p.text + " Filler words follow here." * 20) for p in _passages()]
    m = run_annotated(AnnotatedRunConfig(datasets=files, top_k=2, doc_chars=60), tmp_path / "out",
                      retriever=FakeRetriever(long_p))
    assert m["export"]["reason_ground"]["exported"] == 5  # 2 hops x (query, evidence) + answer
    recs = _records(tmp_path / "out", "sft_reason_ground")
    steps = [r["messages"][-1]["content"] for r in recs]
    assert [parse_step(s).action for s in steps] == ["query", "evidence", "query", "evidence", "answer"]
    assert parse_step(steps[2]).content == "Where was Bruno Kess born?" and parse_step(steps[4]).content == "Vienna"
    assert "Bruno Kess" in (parse_step(steps[1]).content or "") and all(r["tools"] == [] for r in recs)
    llm = ScriptedLLM(steps)
    traj = build_agent("reason_ground", llm, FakeRetriever(long_p), ReasonGroundConfig(top_k=2, doc_chars=60)).run(
        QAItem(id="m1", question=MUSIQUE["question"], golden_answers=["Vienna"]))
    assert traj.answer == "Vienna" and traj.finish_reason == "answered"
    assert [[message_dict(x) for x in req["messages"]] for req in llm.requests] == [r["messages"][:-1] for r in recs]
    assert "..." in recs[1]["messages"][1]["content"]  # the Grounding prompt shows the cut documents
    # off: no reason_ground export
    m2 = run_annotated(AnnotatedRunConfig(datasets=files, top_k=2, reason_ground=False), tmp_path / "o2",
                       retriever=FakeRetriever(_passages()))
    assert "reason_ground" not in m2["export"] and not (tmp_path / "o2" / "sft_reason_ground").exists()
