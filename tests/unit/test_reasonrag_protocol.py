"""ReasonRAG on the one protocol parser and the shared matching core: malformed steps are flagged
and never a pair side, near-duplicate sides never form a pair, a judge reply that fails to parse
leaves the evaluation unfinished (a rerun gives the pairs of an uninterrupted run), drop labels say
what happened, and every rerun leaves exports, cards and trees consistent with the configuration."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_protocol import MALFORMED_SHAPES
from test_reasonrag_pipeline import GOOD_QUERY, QUESTION, config, policy, retriever
from test_reasonrag_tree import _ev, _node, _tree

from agentrag.agents.prompts import GROUNDING_SYSTEM
from agentrag.errors import UserError
from agentrag.records import Message
from agentrag.runs import RunDir
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.synth.reasonrag.pairs import extract_pairs
from agentrag.synth.reasonrag.pipeline import DPO_FILES, RunFiles
from agentrag.synth.reasonrag.tree import Estimate, pruned
from agentrag.synth.reasonrag.values import PROCESS_JUDGE_SYSTEM
from agentrag.testing import OutageLLM, ScriptedLLM

EXPORTED = ("pairs.jsonl", *(f"dpo/{n}" for n in DPO_FILES if n.endswith(".jsonl")))


def files(tmp: Path) -> RunFiles:
    return RunFiles(RunDir(tmp, lock=False))


def malformed_policy(shape: str):
    """The scripted policy, except that a third of the Reasoning rounds after some evidence (the
    rounds that answer) write ``shape``: a malformed turn whose invented text must never reach a
    tree step, a prompt or a pair, beside well-formed siblings that still make pairs."""
    def reply(messages: list[Message], **kw: Any) -> str:
        system, user = messages[0].content or "", messages[-1].content or ""
        reasoning = system not in (GROUNDING_SYSTEM, PROCESS_JUDGE_SYSTEM)
        if reasoning and "<evidence>" in user and int(kw.get("seed") or 0) % 3 == 0:
            return shape
        return policy(messages, **kw)
    return reply


@pytest.mark.parametrize("shape, reason", MALFORMED_SHAPES)
def test_no_pair_holds_text_outside_the_step_for_any_malformed_shape(tmp_path, shape, reason):
    llm = ScriptedLLM(default=malformed_policy(shape))
    cfg = config(mcts=config().mcts.model_copy(update={"iterations": 16}))
    m = run_reasonrag(cfg, tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    tree = files(tmp_path).trees.read()[0]
    bad = [n for n in tree.nodes if n.action == "malformed"]
    assert bad and all(n.flag and reason in n.flag for n in bad)
    assert all("INVENTED" not in n.response for n in tree.nodes)
    # no pair uses a malformed node, and the funnel says why those sibling pairs were dropped
    pairs = files(tmp_path).pairs.read()
    assert pairs  # well-formed siblings are still paired
    ids = {n.id for n in bad}
    assert all(p.metadata["chosen_id"] not in ids and p.metadata["rejected_id"] not in ids for p in pairs)
    assert {r["stage"]: r for r in m["funnel"]}["pairs"]["rejected"].get("malformed", 0) > 0
    for name in EXPORTED:
        path = tmp_path / name
        assert not path.exists() or "INVENTED" not in path.read_text(), name
    # no later prompt (tree, rollouts, judge, greedy agent) ever saw the invented text
    for req in llm.requests:
        assert all("INVENTED" not in (msg.content or "") for msg in req["messages"])
    assert any("INVENTED" in (ev.raw or "") for ev in files(tmp_path).events.read())  # kept as raw only


def test_near_duplicate_sides_never_form_a_pair():
    est = [Estimate(v=0.9, answer="a")], [Estimate(v=0.2, answer="a")]
    kids = [_node("r.0", "r", action="answer", stage="terminal", response="So the answer is <answer>John Smith's</answer>",
                  answer="John Smith's", estimates=est[0]),
            _node("r.1", "r", action="answer", stage="terminal", response="<answer>John Smith</answer>",
                  answer="John Smith", estimates=est[1]),
            _node("r.2", "r", response="<query>director of Film Alpha</query>", estimates=est[0]),
            _node("r.3", "r", response="Next: <query>Film Alpha's director?</query>", estimates=est[1]),
            _node("r.4", "r", action="answer", stage="terminal", response="<answer>Mary Jones</answer>",
                  answer="Mary Jones", estimates=[Estimate(v=0.0, answer="a")])]
    kids[2].content, kids[3].content = "director of Film Alpha", "Film Alpha's director?"
    tree = _tree([_ev(i, "r", k) for i, k in enumerate(kids)])
    rejected: Counter[str] = Counter()
    got = {(p.metadata["chosen_id"], p.metadata["rejected_id"])
           for p in extract_pairs(tree, alpha_label=0.9, min_gap=0.01, max_iter=4, rejected=rejected)}
    # the possessive folds away in canonical tokens (same action); the reordered query is a near-duplicate
    assert (rejected["same_action"], rejected["near_duplicate"]) == (1, 1)
    assert not {("r.0", "r.1"), ("r.2", "r.3")} & got
    assert ("r.0", "r.4") in got and ("r.1", "r.4") in got  # a different answer is still a preference


def test_a_query_written_again_in_capitals_is_a_near_duplicate():
    from agentrag.synth.reasonrag.pairs import near_duplicate_actions
    from agentrag.synth.reasonrag.tree import TreeNode

    q = "Of what country is Welton Irie a citizen?"
    a, b = (TreeNode(id=f"r.{i}", parent="r", depth=1, action="query", content=t, response=f"<query>{t}</query>")
            for i, t in enumerate((q, q.upper())))
    assert near_duplicate_actions(a, b)


def test_a_branch_that_reached_an_answer_is_never_labelled_answerless():
    leaf = _node("r.0.0", "r.0", action="answer", stage="terminal", response="<answer>John Smith</answer>",
                 answer="John Smith")  # its value is missing (no estimate)
    mid = _node("r.0", "r", estimates=[Estimate(v=0.5, answer=None)])
    dead = _node("r.1", "r", estimates=[Estimate(v=0.5, answer=None)])
    tree = _tree([_ev(0, "r", mid), _ev(1, "r", dead), _ev(2, "r.0", leaf)])
    assert pruned(tree) == {"r.1"}


def judge_cfg(**over: Any):
    cfg = config(value=config().value.model_copy(update={"kind": "judge"}),
                 mcts=config().mcts.model_copy(update={"iterations": 12}))
    return cfg.model_copy(update=over)


def pair_rows(tmp: Path) -> list[tuple[Any, ...]]:
    return sorted((p.id, p.chosen[0].content, p.rejected[0].content, p.metadata["gap"])
                  for p in files(tmp).pairs.read())


def on_bad_branch(messages: list[Message], _kw: Any = None) -> bool:
    """The judge's request on a node of the branch that searched the wrong thing."""
    return (messages[0].content == PROCESS_JUDGE_SYSTEM) and "Beta river" in (messages[-1].content or "")


def test_judge_outage_then_rerun_gives_the_pairs_of_an_uninterrupted_run(tmp_path):
    whole = run_reasonrag(judge_cfg(), tmp_path / "whole", llm=ScriptedLLM(default=policy), retriever=retriever(),
                          questions=[QUESTION])
    assert whole["pairs"] > 0 and whole["unfinished"] == 0
    judge = OutageLLM(ScriptedLLM(default=policy), fails=on_bad_branch)
    cut = run_reasonrag(judge_cfg(), tmp_path / "cut", llm=ScriptedLLM(default=policy), judge=judge,
                        retriever=retriever(), questions=[QUESTION])
    assert cut["unfinished"] == 1 and judge.failures > 0 and not files(tmp_path / "cut").trees.read()
    judge.down = False
    again = run_reasonrag(judge_cfg(), tmp_path / "cut", llm=ScriptedLLM(default=policy), judge=judge,
                          retriever=retriever(), questions=[QUESTION])
    assert again["unfinished"] == 0
    assert pair_rows(tmp_path / "cut") == pair_rows(tmp_path / "whole")


def test_a_judge_reply_that_does_not_parse_leaves_the_evaluation_unfinished(tmp_path):
    state = {"garbage": True, "asked": 0}

    def judge_reply(messages: list[Message], **kw: Any) -> str:
        if state["garbage"] and on_bad_branch(messages):
            state["asked"] += 1
            return "I think these steps are fine, score: high"
        return policy(messages, **kw)

    whole = run_reasonrag(judge_cfg(), tmp_path / "whole", llm=ScriptedLLM(default=policy), retriever=retriever(),
                          questions=[QUESTION])
    judge = ScriptedLLM(default=judge_reply)
    first = run_reasonrag(judge_cfg(), tmp_path / "run", llm=ScriptedLLM(default=policy), judge=judge,
                          retriever=retriever(), questions=[QUESTION])
    assert first["unfinished"] == 1 and state["asked"] == 3  # asked again, then left unfinished
    assert "no valid judgement" in next(iter(first["unfinished_items"].values()))
    assert not files(tmp_path / "run").pairs.read()  # nothing decided, nothing dropped for good
    state["garbage"] = False
    again = run_reasonrag(judge_cfg(), tmp_path / "run", llm=ScriptedLLM(default=policy), judge=judge,
                          retriever=retriever(), questions=[QUESTION])
    assert again["unfinished"] == 0 and again["pairs"] == whole["pairs"] > 0
    assert pair_rows(tmp_path / "run") == pair_rows(tmp_path / "whole")
    tree = files(tmp_path / "run").trees.read()[0]
    assert all(not (n.flag or "").startswith("judge") for n in tree.nodes)


def test_export_off_removes_the_earlier_export_and_no_card_outlives_its_pairs(tmp_path):
    llm = ScriptedLLM(default=policy)
    first = run_reasonrag(config(), tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    assert first["pairs"] > 0 and all((tmp_path / "dpo" / n).exists() for n in DPO_FILES)
    off = run_reasonrag(config(export=False), tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    assert off["export"]["exported"] == 0 and not (tmp_path / "dpo").exists()
    on = run_reasonrag(config(), tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    assert on["export"]["exported"] == first["pairs"] and (tmp_path / "dpo" / "README.md").exists()
    none = run_reasonrag(config(pairs=config().pairs.model_copy(update={"min_gap": 2.0})), tmp_path, llm=llm,
                         retriever=retriever(), questions=[QUESTION])
    assert none["pairs"] == 0 and not (tmp_path / "dpo").exists()  # no card naming deleted files


def test_python_api_refuses_trees_of_other_search_settings_with_the_diff(tmp_path):
    llm = ScriptedLLM(default=policy)
    run_reasonrag(config(), tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    trees = (tmp_path / "trees.jsonl").read_text()
    bigger = config(mcts=config().mcts.model_copy(update={"iterations": 12}))
    with pytest.raises(UserError, match=r"mcts\.iterations: 8 -> 12"):
        run_reasonrag(bigger, tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    assert (tmp_path / "trees.jsonl").read_text() == trees
    assert "iterations: 8" in (tmp_path / "config.yaml").read_text()  # nothing rewritten
    # settings the pairs are rebuilt from are not a search change
    relabel = config(pairs=config().pairs.model_copy(update={"min_gap": 0.05}))
    assert run_reasonrag(relabel, tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])["unfinished"] == 0
    assert GOOD_QUERY in trees
