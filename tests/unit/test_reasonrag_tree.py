"""ReasonRAG tree algebra on hand-built trees: Eq. 5 selection, Eq. 1 values, Eq. 7 counts,
pair extraction and pruning."""

from __future__ import annotations

import math

import pytest

from agentrag.synth.reasonrag.pairs import extract_pairs
from agentrag.synth.reasonrag.tree import (
    Estimate,
    IterationEvent,
    SearchTree,
    TreeNode,
    pruned,
    q_value,
    select,
    select_child,
    uct_score,
)


def _node(nid: str, parent: str, *, action: str = "query", stage: str = "grounding", response: str | None = None,
          estimates: list[Estimate] | None = None, answer: str | None = None) -> TreeNode:
    depth = nid.count(".")
    return TreeNode(id=nid, parent=parent, depth=depth, action=action, stage=stage,  # type: ignore[arg-type]
                    response=response if response is not None else f"resp {nid}", answer=answer,
                    estimates=estimates or [])


def _ev(i: int, selected: str, node: TreeNode | None, outcome: str = "child") -> IterationEvent:
    return IterationEvent(id=f"q:{i}", question_id="q", iteration=i, selected=selected,
                          outcome=outcome, node=node)  # type: ignore[arg-type]


def _tree(events: list[IterationEvent]) -> SearchTree:
    return SearchTree.replay("q", "Who?", ["John Smith"], events)


def test_eq1_spre_value_for_given_rollouts_and_alpha():
    ests = [Estimate(v=1.0, steps=2), Estimate(v=0.5, steps=3), Estimate(v=0.0, steps=4)]
    assert q_value(ests, 0.9) == pytest.approx((1.0 * 0.9 ** 2 + 0.5 * 0.9 ** 3 + 0.0) / 3)
    assert q_value(ests, 1.0) == pytest.approx(0.5)
    # weight repeats an estimate (a terminal node's k identical rollouts); judge values have no step penalty
    assert q_value([Estimate(v=1.0, steps=1, weight=3), Estimate(v=0.0, steps=1)], 0.5) == pytest.approx(0.375)
    assert q_value([Estimate(v=0.7)], 0.5) == pytest.approx(0.7)
    assert q_value([], 0.9) == 0.0


def test_eq7_backprop_counts_and_estimates():
    a = _node("r.0", "r", estimates=[Estimate(v=1.0, steps=2, answer="x")])
    b = _node("r.1", "r", estimates=[Estimate(v=0.0, steps=3)])
    c = _node("r.0.0", "r.0", action="evidence", stage="reasoning", estimates=[Estimate(v=0.5, steps=3, answer="y")])
    tree = _tree([_ev(0, "r", a), _ev(1, "r", b), _ev(2, "r.0", None, "duplicate"), _ev(3, "r.0", c)])
    n = tree.by_id()
    assert (n["r"].N, n["r.0"].N, n["r.1"].N, n["r.0.0"].N) == (3, 2, 1, 1)
    assert n["r.0"].samples == 2 and n["r.0"].children == ["r.0.0"]  # the duplicate spent a sample
    assert n["r"].q(1.0) == pytest.approx(0.5)  # mean of 1.0, 0.0, 0.5
    assert n["r.0"].q(1.0) == pytest.approx(0.75)
    assert tree.iterations == 4


def test_eq5_selection_order():
    kids = [_node("r.0", "r"), _node("r.1", "r"), _node("r.2", "r")]
    kids[0].N, kids[0].backed = 3, [Estimate(v=0.9)]
    kids[1].N, kids[1].backed = 1, [Estimate(v=0.2)]
    kids[2].N = 0
    assert select_child(kids, 1.414, 1.0).id == "r.2"  # unvisited first
    kids[2].N, kids[2].backed = 2, [Estimate(v=0.5)]
    total = 6
    scores = {k.id: uct_score(k, total, 1.414, 1.0) for k in kids}
    assert scores["r.1"] == pytest.approx(0.2 + 1.414 * math.sqrt(6) / 2)
    assert select_child(kids, 1.414, 1.0).id == max(scores, key=lambda k: scores[k]) == "r.1"
    # no exploration: pure exploitation
    assert select_child(kids, 0.0, 1.0).id == "r.0"


def test_selection_expands_before_descending_and_skips_terminal_and_exhausted():
    a = _node("r.0", "r", action="answer", stage="terminal", answer="x", estimates=[Estimate(v=1.0, steps=1)])
    b = _node("r.1", "r", estimates=[Estimate(v=0.0, steps=3)])
    tree = _tree([_ev(0, "r", a)])
    assert select(tree, 2, 1.414, 1.0).id == "r"  # the root has a sample left
    tree.apply(_ev(1, "r", b))
    # r.0 scores higher but is terminal (never re-expanded): r.1 is chosen
    assert select(tree, 2, 1.414, 1.0).id == "r.1"
    tree.apply(_ev(2, "r.1", None, "error"))
    tree.apply(_ev(3, "r.1", None, "error"))
    assert select(tree, 2, 1.414, 1.0) is None  # r.1 spent its samples without children: exhausted


def test_pruning_of_answerless_branches():
    a = _node("r.0", "r", estimates=[Estimate(v=0.0, steps=4)])  # its rollout never answered
    b = _node("r.1", "r", estimates=[Estimate(v=1.0, steps=2, answer="John Smith")])
    c = _node("r.0.0", "r.0", action="evidence", stage="reasoning", estimates=[Estimate(v=0.0, steps=4)])
    tree = _tree([_ev(0, "r", a), _ev(1, "r", b), _ev(2, "r.0", c)])
    assert pruned(tree) == {"r.0", "r.0.0"}
    leaf = _node("r.0.1", "r.0", action="answer", stage="terminal", answer="Mary",
                 estimates=[Estimate(v=0.0, steps=2, answer="Mary")])
    tree.apply(_ev(3, "r.0", leaf))
    assert pruned(tree) == {"r.0.0"}  # r.0 now leads to an answer (a wrong one still counts)


def test_pair_extraction_threshold_dedup_sibling_only():
    def est(v: float) -> list[Estimate]:
        return [Estimate(v=v, steps=None, answer="a")]

    kids = [_node("r.0", "r", response="same", estimates=est(0.9)),
            _node("r.1", "r", response="same", estimates=est(0.1)),       # identical response to r.0
            _node("r.2", "r", response="other", estimates=est(0.895)),    # |dQ| 0.005 < 0.01 vs r.0
            _node("r.3", "r", response="third", estimates=est(0.3)),
            _node("r.4", "r", response="dead", estimates=[Estimate(v=0.0)])]  # no answer: pruned
    cousin = _node("r.3.0", "r.3", action="evidence", stage="reasoning", response="cousin", estimates=est(0.0))
    events = [_ev(i, "r", k) for i, k in enumerate(kids)] + [_ev(5, "r.3", cousin)]
    tree = _tree(events)
    pairs = extract_pairs(tree, alpha_label=0.9, min_gap=0.01, max_iter=4)
    got = {(p.metadata["chosen_id"], p.metadata["rejected_id"]) for p in pairs}
    # r.3's value is the mean of its own and its child's estimate: (0.3 + 0.0) / 2 = 0.15
    assert got == {("r.0", "r.3"), ("r.2", "r.1"), ("r.2", "r.3"), ("r.3", "r.1")}
    for p in pairs:
        assert p.metadata["gap"] >= 0.01 and p.metadata["layer"] == 1
        assert p.chosen[0].content != p.rejected[0].content
        assert p.metadata["type"] == "Q-Q"
        assert p.prompt[-1].role == "user" and "Who?" in (p.prompt[-1].content or "")


def test_pairs_are_siblings_only_with_two_parents_of_several_children():
    def est(v: float) -> list[Estimate]:
        return [Estimate(v=v, steps=None, answer="a")]

    p0 = _node("r.0", "r", response="<query>first parent</query>", estimates=est(0.5))
    p1 = _node("r.1", "r", response="<query>second parent</query>", estimates=est(0.5))
    values = {"r.0": (0.9, 0.5, 0.1), "r.1": (0.8, 0.4, 0.0)}
    events = [_ev(0, "r", p0), _ev(1, "r", p1)]
    for parent, vals in values.items():
        for j, v in enumerate(vals):
            kid = _node(f"{parent}.{j}", parent, action="evidence", stage="reasoning",
                        response=f"<evidence>{parent} fact {j}</evidence>", estimates=est(v))
            events.append(_ev(len(events), parent, kid))
    tree = _tree(events)
    pairs = [p for p in extract_pairs(tree, alpha_label=0.9, min_gap=0.01, max_iter=4) if p.metadata["layer"] == 2]
    # 3 pairs under each parent; none across parents (r.0.0 vs r.1.2 would have the largest gap)
    assert len(pairs) == 6
    for p in pairs:
        w, lo = p.metadata["chosen_id"], p.metadata["rejected_id"]
        assert w.rsplit(".", 1)[0] == lo.rsplit(".", 1)[0] == p.metadata["parent_id"]
        assert int(w[-1]) < int(lo[-1])  # the higher value wins within the family
        # the prompt is the parent's state: its own query, not the other parent's
        other = "second parent" if p.metadata["parent_id"] == "r.0" else "first parent"
        assert other not in (p.prompt[-1].content or "")
    by_parent = {pid: {(p.metadata["chosen_id"], p.metadata["rejected_id"]) for p in pairs
                       if p.metadata["parent_id"] == pid} for pid in values}
    assert by_parent["r.0"] == {("r.0.0", "r.0.1"), ("r.0.0", "r.0.2"), ("r.0.1", "r.0.2")}
    assert by_parent["r.1"] == {("r.1.0", "r.1.1"), ("r.1.0", "r.1.2"), ("r.1.1", "r.1.2")}
