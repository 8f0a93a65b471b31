"""The search tree of one question: node records, iteration events, and the pure tree algebra of
Appendix A — selection (Eq. 5), backpropagation (Eq. 7), Q from value estimates (Eq. 1), and the
pruning of branches that never reach an answer (§2.2.3).

A node is a state s = (x, y_{<=t}, stage) reached by one action: ``query`` (Query Generation),
``evidence`` (Evidence Extraction) or ``answer`` (Answer Generation). The tree is never stored
as a mutable object: it is the fold of its :class:`IterationEvent` records in order
(:meth:`SearchTree.replay`), so a run killed mid-search rebuilds exactly the tree it had.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import Field

from agentrag.records import Hit, Provenance, Record, Usage

Action = Literal["root", "query", "evidence", "answer", "none", "malformed"]
Stage = Literal["reasoning", "grounding", "terminal"]
Outcome = Literal["child", "duplicate", "error"]

#: the action letters of Figure 2a (pair types)
ACTION_LETTER = {"answer": "A", "query": "Q", "evidence": "E", "none": "N", "malformed": "M"}


class Estimate(Record):
    """One value sample of a node: a SPRE rollout (its correctness ``v`` and total ``steps``) or a
    judge score (``steps`` None: no step penalty). ``weight`` repeats it (a terminal node's k
    rollouts are all the same answer). ``answer`` is the answer it reached, if any. ``flag`` marks a
rollout cut short by a failed call (no value: Eq. 1 skips it)."""

    v: float
    steps: int | None = None
    answer: str | None = None
    weight: int = 1
    origin: str = ""
    flag: str | None = None


def q_value(estimates: Iterable[Estimate], alpha: float) -> float:
    """Eq. 1: the mean of v(rollout_i) * alpha^step(rollout_i) over the unflagged estimates (0 when
    none)."""
    total, count = 0.0, 0
    for e in estimates:
        if e.flag is not None:
            continue
        total += e.weight * e.v * (alpha ** e.steps if e.steps is not None else 1.0)
        count += e.weight
    return total / count if count else 0.0


class TreeNode(Record):
    """A state of the search tree and the action that produced it (see the module docstring)."""

    id: str
    parent: str | None = None
    depth: int = 0
    action: Action = "root"
    stage: Stage = "reasoning"
    response: str = ""
    content: str | None = None
    query: str = ""
    documents: str = ""
    hits: list[Hit] = Field(default_factory=list)
    forced: bool = False
    answer: str | None = None
    score: float | None = None
    estimates: list[Estimate] = Field(default_factory=list)
    flag: str | None = None
    usage: Usage = Field(default_factory=Usage)
    value_usage: Usage = Field(default_factory=Usage)
    provenance: Provenance | None = None
    # search statistics, filled by replay
    N: int = 0
    samples: int = 0
    backed: list[Estimate] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.stage == "terminal"

    def q(self, alpha: float) -> float:
        """Q(s): Eq. 1 over every estimate backed up through this node (its own and its subtree's)."""
        return q_value(self.backed, alpha)


class IterationEvent(Record):
    """One MCTS iteration of one question: the node selected for expansion, what the sample gave
    (a new ``child``, a ``duplicate`` of a sibling, or a non-retryable ``error`` such as an empty
    output or a failed call), the new node with its value estimates, and the call's usage."""

    id: str
    question_id: str
    iteration: int
    selected: str
    outcome: Outcome
    node: TreeNode | None = None
    raw: str | None = None
    reason: str | None = None
    usage: Usage = Field(default_factory=Usage)


class SearchTree(Record):
    """The finished tree of one question (written once the search ends)."""

    id: str
    question: str
    golden_answers: list[str]
    nodes: list[TreeNode]
    iterations: int
    status: Literal["done", "exhausted"] = "done"

    @classmethod
    def replay(cls, qid: str, question: str, golds: Sequence[str],
               events: Iterable[IterationEvent]) -> SearchTree:
        """The tree after applying ``events`` in order to a fresh root."""
        tree = cls(id=qid, question=question, golden_answers=list(golds), nodes=[TreeNode(id="r")], iterations=0)
        for ev in events:
            tree.apply(ev)
        return tree

    def by_id(self) -> dict[str, TreeNode]:
        return {n.id: n for n in self.nodes}

    def node(self, node_id: str) -> TreeNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def path(self, node_id: str) -> list[TreeNode]:
        """The nodes from the root to ``node_id`` (inclusive)."""
        nodes = self.by_id()
        out = [nodes[node_id]]
        while out[-1].parent is not None:
            out.append(nodes[out[-1].parent])  # type: ignore[index]
        return out[::-1]

    def apply(self, ev: IterationEvent) -> None:
        """One iteration: the selected node spends a sample; a new child is attached and
        backpropagated (Eq. 7: N + 1 on the path to the root; its estimates join every
        ancestor's, so each Q stays the Eq. 1 mean over the rollouts below it)."""
        self.iterations = max(self.iterations, ev.iteration + 1)
        parent = self.node(ev.selected)
        parent.samples += 1
        if ev.outcome != "child" or ev.node is None:
            return
        child = ev.node.model_copy(deep=True)
        child.N, child.samples, child.backed, child.children = 0, 0, [], []
        self.nodes.append(child)
        parent.children.append(child.id)
        backpropagate(self, child.id, child.estimates)

    def answer_leaves(self) -> list[TreeNode]:
        return [n for n in self.nodes if n.action == "answer" and n.answer]


def backpropagate(tree: SearchTree, node_id: str, estimates: Sequence[Estimate]) -> None:
    """Eq. 7 along the path from ``node_id`` to the root, adding ``estimates`` to each node."""
    for n in tree.path(node_id):
        n.N += 1
        n.backed.extend(estimates)


def uct_score(node: TreeNode, sum_n: int, c_uct: float, alpha: float) -> float:
    """Eq. 5: Q(s_i) + c_uct * sqrt(sum_i N(s_i)) / (1 + N(s_i)); an unvisited node scores +inf."""
    if node.N == 0:
        return math.inf
    return node.q(alpha) + c_uct * math.sqrt(sum_n) / (1 + node.N)


def select_child(children: Sequence[TreeNode], c_uct: float, alpha: float, sum_n: int | None = None) -> TreeNode:
    """argmax of Eq. 5 over ``children`` (unvisited first; ties go to the earlier child). ``sum_n``
    is Eq. 5's sum of N over ALL children of the parent (default: over ``children``), so closed
    siblings still count when only the open ones are candidates."""
    if sum_n is None:
        sum_n = sum(ch.N for ch in children)
    best, best_score = children[0], -math.inf
    for ch in children:
        s = uct_score(ch, sum_n, c_uct, alpha)
        if s > best_score:
            best, best_score = ch, s
    return best


def open_nodes(tree: SearchTree, max_children: int) -> set[str]:
    """Ids of the nodes where a search can still expand: non-terminal with samples left, or with
    an open child. Terminal nodes are never re-expanded; exhausted subtrees are skipped."""
    out: set[str] = set()
    for n in sorted(tree.nodes, key=lambda n: -n.depth):
        if n.terminal:
            continue
        if n.samples < max_children or any(c in out for c in n.children):
            out.add(n.id)
    return out


def select(tree: SearchTree, max_children: int, c_uct: float, alpha: float) -> TreeNode | None:
    """Selection: from the root, expand the first node on the way with samples left; otherwise
    descend to the Eq. 5 argmax among the open children. ``None`` when the tree is exhausted."""
    is_open = open_nodes(tree, max_children)
    nodes = tree.by_id()
    node = nodes["r"]
    while node.id in is_open:
        if node.samples < max_children:
            return node
        node = select_child([nodes[c] for c in node.children if c in is_open], c_uct, alpha,
                            sum_n=sum(nodes[c].N for c in node.children))
    return None


def reaches_answer(node: TreeNode, nodes: dict[str, TreeNode] | None = None) -> bool:
    """Whether the branch at ``node`` yields a final answer: an answer leaf in its subtree (walked
    through ``nodes`` when given, so a leaf whose value is missing still counts), or a SPRE rollout
    from it or below it that ended in an answer."""
    if node.answer or any(e.answer for e in node.backed):
        return True
    return nodes is not None and any(reaches_answer(nodes[c], nodes) for c in node.children if c in nodes)


def pruned(tree: SearchTree) -> set[str]:
    """Ids of the nodes on branches that never reach an answer (dropped from the data)."""
    nodes = tree.by_id()
    return {n.id for n in tree.nodes if n.id != "r" and not reaches_answer(n, nodes)}


__all__ = ["Action", "Stage", "Estimate", "q_value", "TreeNode", "IterationEvent", "SearchTree", "backpropagate",
           "uct_score", "select_child", "open_nodes", "select", "reaches_answer", "pruned", "ACTION_LETTER"]
