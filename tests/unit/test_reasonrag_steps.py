"""The tree's steps are the agent's steps (issue 21 item 1): a model that keeps writing after
``</query>`` (invented documents and an answer) leaves no trace in the tree, the pairs, the DPO
export or later prompts; an empty ``<query>`` moves to Grounding (issue 24); the forced round
grounds a pending query first, in the tree and the rollouts as in the agent."""

from __future__ import annotations

import json

from test_reasonrag_pipeline import GOOD_QUERY, QUESTION, config, policy, retriever

from agentrag.agents import build_agent
from agentrag.agents.prompts import FORCE_ANSWER, GROUNDING_SYSTEM, REASONING_SYSTEM
from agentrag.agents.reason_ground import forced_round, parse_step
from agentrag.records import Message
from agentrag.runs import RunDir
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.synth.reasonrag.pipeline import RunFiles
from agentrag.testing import ScriptedLLM

INVENTED = "\nDocuments: Doc 1 (Title: Film Alpha) INVENTED Mary Jones directed it.\n<answer>Mary Jones</answer>"


def chatty(messages: list[Message], **kw: object) -> str:
    """The scripted policy, but it ignores the stop sequence and keeps writing after ``</query>``."""
    out = policy(messages, **kw)
    return out + INVENTED if out.endswith("</query>") else out


def test_parse_step_cuts_at_the_stop_sequence():
    step = parse_step("Next: <query>Film Alpha director</query>" + INVENTED)
    assert (step.action, step.content) == ("query", "Film Alpha director")
    assert step.text == "Next: <query>Film Alpha director</query>"
    # a forced round: a query cut at the stop has no answer after it
    assert parse_step("<query>x</query> <answer>Mary Jones</answer>", forced=True).action is None
    assert parse_step("<answer>John Smith</answer> trailing", forced=True).content == "John Smith"


def test_continuation_past_query_reaches_no_tree_pair_export_or_prompt(tmp_path):
    llm = ScriptedLLM(default=chatty)
    metrics = run_reasonrag(config(), tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    files = RunFiles(RunDir(tmp_path, lock=False))
    tree = files.trees.read()[0]
    queries = [n for n in tree.nodes if n.action == "query"]
    assert queries and metrics["pairs"] > 0
    for n in queries:
        assert n.response.endswith("</query>") and "INVENTED" not in n.response
    for name in ("trees.jsonl", "pairs.jsonl", "dpo/trl_dpo.jsonl", "dpo/dpo_sharegpt.jsonl",
                 "dpo/dpo_alpaca.jsonl"):
        text = (tmp_path / name).read_text()
        assert text and "INVENTED" not in text and "Documents: Doc 1" not in text, name
    greedy = files.greedy.read()[0]
    assert greedy.steps and all("INVENTED" not in (st.thought or "") for st in greedy.steps)
    # no later prompt (tree, rollouts, judge, greedy agent) ever saw the continuation
    for req in llm.requests:
        assert all("INVENTED" not in (m.content or "") for m in req["messages"])
        assert req.get("stop") == ["</query>"] or req.get("response_format") is not None
    # the uncut output is kept as the event's raw output only
    raws = [ev.raw or "" for ev in files.events.read()]
    assert any("INVENTED" in r for r in raws)
    assert json.loads((tmp_path / "metrics.json").read_text())["unfinished"] == 0


def test_tree_and_agent_cut_the_same_step():
    agent_llm = ScriptedLLM([chatty([Message(role="system", content=REASONING_SYSTEM),
                                     Message(role="user", content="q")], seed=0), "<answer>x</answer>"])
    traj = build_agent("reason_ground", agent_llm, retriever(), max_steps=2).run(QUESTION)
    assert traj.steps[0].thought == parse_step(chatty([Message(role="system", content=REASONING_SYSTEM),
                                                        Message(role="user", content="q")], seed=0)).text
    assert "INVENTED" not in (agent_llm.requests[1]["messages"][1].content or "")


def test_an_empty_query_moves_to_grounding():
    r = retriever()
    llm = ScriptedLLM(["Let me search. <query> </query>",
                       "<evidence>None</evidence> So the next query is <query>Film Alpha director</query>",
                       "<evidence>Film Alpha director was John Smith.</evidence>", "<answer>John Smith</answer>"])
    traj = build_agent("reason_ground", llm, r).run(QUESTION)
    assert traj.answer == "John Smith" and traj.steps[0].error is None
    assert r.queries == [GOOD_QUERY]  # nothing retrieved for the empty query
    assert [q["messages"][0].content for q in llm.requests][:3] == [REASONING_SYSTEM, GROUNDING_SYSTEM,
                                                                     GROUNDING_SYSTEM]
    step = parse_step("<query></query>")
    assert (step.action, step.content) == ("query", "")


def test_forced_round_schedule_grounds_a_pending_query_first():
    # max_iter 3: two free rounds, then a pending grounding step, then the forced round
    assert [forced_round(d, "reasoning", 3) for d in range(4)] == [False, False, True, True]
    assert [forced_round(d, "grounding", 3) for d in range(4)] == [False, False, False, True]


def test_tree_forced_leaves_follow_the_agents_schedule(tmp_path):
    cfg = config(mcts=config().mcts.model_copy(update={"max_iter": 2, "iterations": 12}))
    run_reasonrag(cfg, tmp_path, llm=ScriptedLLM(default=policy), retriever=retriever(), questions=[QUESTION])
    tree = RunFiles(RunDir(tmp_path, lock=False)).trees.read()[0]
    nodes = tree.by_id()
    forced = [n for n in tree.nodes if n.forced]
    assert forced
    for n in forced:
        parent = nodes[n.parent or "r"]
        # a query from the last free round (depth 1) is grounded first: the forced leaf is at depth 3
        assert n.depth == (3 if parent.action == "evidence" else 2)
    grounded = [n for n in tree.nodes if n.depth == 2 and not n.forced]
    assert grounded and all(nodes[n.parent or "r"].stage == "grounding" for n in grounded)
    assert any("John Smith" in (n.response or "") for n in forced)
    assert FORCE_ANSWER  # the forced prompt is the agent's


def test_doc_chars_cuts_documents_in_the_tree_the_rollouts_and_the_greedy_agent(tmp_path):
    """``mcts.doc_chars`` shows every Grounding prompt (expansions, SPRE rollouts, greedy baseline)
    the documents cut as the reason_ground agent's ``doc_chars`` cuts them."""
    from agentrag.agents.tools import format_documents

    long_r = retriever()
    for p in long_r.passages:
        p.text += " More words about the film follow here." * 10
    cfg = config(mcts=config().mcts.model_copy(update={"doc_chars": 40}))
    llm = ScriptedLLM(default=policy)
    run_reasonrag(cfg, tmp_path, llm=llm, retriever=long_r, questions=[QUESTION])
    grounding = [r["messages"][1].content or "" for r in llm.requests if r["messages"][0].content == GROUNDING_SYSTEM]
    assert grounding
    cut = format_documents(long_r.search([GOOD_QUERY], 1)[0], neutralize=True, doc_chars=40)
    assert "..." in cut and any(g.endswith(cut) for g in grounding)
    assert not any(g.endswith(format_documents(long_r.search([GOOD_QUERY], 1)[0], neutralize=True))
                   for g in grounding)
