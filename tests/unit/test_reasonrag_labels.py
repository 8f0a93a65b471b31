"""Pair labels and filters (issue 21 items 2 and 3): one decay constant by default, judge mode
labels by the outcome reward decayed by steps, siblings taking the same action in other words are
not a pair, and changing a pair or value setting rebuilds the pairs from the stored trees with no
LLM call."""

from __future__ import annotations

import json

import pytest
from test_reasonrag_pipeline import QUESTION, config, policy, retriever
from test_reasonrag_tree import _ev, _node, _tree

from agentrag.runs import RunDir
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.synth.reasonrag.config import ValueConfig
from agentrag.synth.reasonrag.pairs import extract_pairs, outcome_estimates
from agentrag.synth.reasonrag.pipeline import RunFiles
from agentrag.synth.reasonrag.tree import Estimate, q_value
from agentrag.testing import ScriptedLLM


def test_one_decay_constant_by_default_and_the_released_split_as_an_option():
    v = ValueConfig()
    assert v.search_alpha == v.label_alpha == v.alpha == 0.9
    v = ValueConfig(alpha=0.8)
    assert v.search_alpha == v.label_alpha == 0.8
    released = ValueConfig(alpha_search=0.95, alpha_label=0.9)
    assert (released.search_alpha, released.label_alpha) == (0.95, 0.9)


def est(v: float, answer: str | None = "a", steps: int | None = None) -> list[Estimate]:
    return [Estimate(v=v, steps=steps, answer=answer)]


def test_same_action_in_other_words_is_not_a_pair():
    kids = [_node("r.0", "r", response="So the next query is <query>Film Alpha director</query>",
                  estimates=est(0.9)),
            _node("r.1", "r", response="I will search <query>film alpha Director.</query>", estimates=est(0.2)),
            _node("r.2", "r", action="answer", stage="terminal", response="<answer>John Smith</answer>",
                  answer="John Smith", estimates=est(0.8)),
            _node("r.3", "r", action="answer", stage="terminal", response="It is <answer>john smith.</answer>",
                  answer="john smith.", estimates=est(0.1))]
    kids[0].content, kids[1].content = "Film Alpha director", "film alpha Director."
    tree = _tree([_ev(i, "r", k) for i, k in enumerate(kids)])
    from collections import Counter

    rejected: Counter[str] = Counter()
    pairs = extract_pairs(tree, alpha_label=0.9, min_gap=0.01, max_iter=4, rejected=rejected)
    got = {(p.metadata["chosen_id"], p.metadata["rejected_id"]) for p in pairs}
    assert ("r.0", "r.1") not in got and ("r.2", "r.3") not in got
    assert rejected["same_action"] == 2
    # different actions and different queries / answers are still paired
    assert {("r.0", "r.3"), ("r.2", "r.1"), ("r.0", "r.2")} <= got


def test_judge_mode_labels_come_from_the_outcome_reward_decayed_by_steps():
    # the judge prefers r.0 (0.9 vs 0.1), but the only answer below r.0 is wrong and r.1's is right
    a = _node("r.0", "r", estimates=est(0.9, answer=None))
    b = _node("r.1", "r", estimates=est(0.1, answer=None))
    wrong = _node("r.0.0", "r.0", action="answer", stage="terminal", answer="Mary", estimates=est(0.8, "Mary"))
    right = _node("r.1.0", "r.1", action="answer", stage="terminal", answer="John Smith", estimates=est(0.3))
    wrong.score, right.score = 0.0, 1.0
    slow = _node("r.1.1", "r.1", action="evidence", stage="reasoning", estimates=est(0.5, answer=None))
    slow_leaf = _node("r.1.1.0", "r.1.1", action="answer", stage="terminal", answer="John", estimates=est(0.5))
    slow_leaf.score = 0.5
    tree = _tree([_ev(0, "r", a), _ev(1, "r", b), _ev(2, "r.0", wrong), _ev(3, "r.1", right),
                  _ev(4, "r.1", slow), _ev(5, "r.1.1", slow_leaf)])
    out = outcome_estimates(tree)
    assert q_value(out["r.1"], 0.9) == pytest.approx((1.0 * 0.9 ** 2 + 0.5 * 0.9 ** 3) / 2)
    assert q_value(out["r.0"], 0.9) == 0.0
    judged = extract_pairs(tree, alpha_label=0.9, min_gap=0.01, max_iter=4, labels="judge")
    root = [p for p in judged if p.metadata["parent_id"] == "r"]
    assert len(root) == 1 and root[0].metadata["chosen_id"] == "r.1"
    assert root[0].metadata["chosen_value"] == pytest.approx(round((0.81 + 0.5 * 0.729) / 2, 6))
    # the same tree labelled by its (judge) estimates would prefer the wrong branch
    by_estimates = extract_pairs(tree, alpha_label=0.9, min_gap=0.01, max_iter=4)
    assert [p.metadata["chosen_id"] for p in by_estimates if p.metadata["parent_id"] == "r"] == ["r.0"]


def test_changed_pair_settings_rebuild_the_pairs_without_llm_calls(tmp_path):
    llm = ScriptedLLM(default=policy)
    first = run_reasonrag(config(), tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    gaps = [p.metadata["gap"] for p in RunFiles(RunDir(tmp_path, lock=False)).pairs.read()]
    assert first["pairs"] == len(gaps) > 0 and max(gaps) < 0.75
    calls = llm.calls
    # a stricter gap: the stored pairs are stale, rebuilt from the trees; none passes, no export left
    strict = config(pairs=config().pairs.model_copy(update={"min_gap": 0.75}))
    second = run_reasonrag(strict, tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    assert second["pairs"] == 0 and not RunFiles(RunDir(tmp_path, lock=False)).pairs.read()
    assert not (tmp_path / "dpo" / "trl_dpo.jsonl").exists()
    assert json.loads((tmp_path / "pairs.settings.json").read_text())["min_gap"] == 0.75
    # a value setting (no decay on the labels) relabels: the gaps grow past the threshold again
    flat = strict.model_copy(update={"value": ValueConfig(rollouts=2, alpha_label=1.0)})
    third = run_reasonrag(flat, tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    pairs = RunFiles(RunDir(tmp_path, lock=False)).pairs.read()
    assert third["pairs"] == len(pairs) > 0 and all(p.metadata["gap"] >= 0.75 for p in pairs)
    assert len((tmp_path / "dpo" / "trl_dpo.jsonl").read_text().splitlines()) == len(pairs)
    back = run_reasonrag(config(), tmp_path, llm=llm, retriever=retriever(), questions=[QUESTION])
    assert back["pairs"] == first["pairs"]
    assert [p.metadata["gap"] for p in RunFiles(RunDir(tmp_path, lock=False)).pairs.read()] == gaps
    assert llm.calls == calls  # derived from the stored trees: no call paid again


def test_a_failed_rollout_call_flags_its_estimate_and_the_funnel_counts_it(tmp_path):
    def rollouts_fail_in_grounding(messages, **kw):  # rollouts run at their own temperature (0.7)
        if kw.get("temperature") == 0.7 and "Latest query" in (messages[-1].content or ""):
            return ""
        return policy(messages, **kw)

    cfg = config(value=config().value.model_copy(update={"rollout_temperature": 0.7}))
    m = run_reasonrag(cfg, tmp_path, llm=ScriptedLLM(default=rollouts_fail_in_grounding), retriever=retriever(),
                      questions=[QUESTION])
    tree = RunFiles(RunDir(tmp_path, lock=False)).trees.read()[0]
    flagged = [e for n in tree.nodes for e in n.estimates if e.flag]
    assert flagged and all(e.flag == "empty output" and e.answer is None for e in flagged)
    row = {r["stage"]: r for r in m["funnel"]}["mcts"]
    assert row["rejected"]["flagged_rollout"] == len(flagged)
    # a flagged rollout carries no value: Eq. 1 is the mean over the others
    node = next(n for n in tree.nodes if any(e.flag for e in n.estimates))
    ok = [e for e in node.estimates if not e.flag]
    assert node.q(0.9) == pytest.approx(q_value(node.backed, 0.9))
    assert q_value(node.estimates, 0.9) == pytest.approx(q_value(ok, 0.9))
