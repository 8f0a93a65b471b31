from __future__ import annotations

import json
from collections import Counter

import pytest
from test_ragshaper_support import PASSAGES, curator_llm, main_retriever

from agentrag.records import Message, ToolCall
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.paths import path_score, root_to_leaf_paths, select_paths
from agentrag.synth.ragshaper.schema import DocRef, InfoTree, TreeNode
from agentrag.synth.ragshaper.tree import InfoCurator
from agentrag.testing import ScriptedLLM


def _retrieval_only(messages: list[Message], **kw: object) -> str:
    return json.dumps({"intent": "next hop", "tool": "dense_retrieval", "query": "Lysa town", "top_k": 1})


def _cfg(**overrides: object) -> RagShaperConfig:
    cfg = RagShaperConfig()
    for k, v in overrides.items():
        setattr(cfg.curator, k, v)
    return cfg


def _children(tree: InfoTree) -> dict[str, int]:
    c = Counter(n.parent for n in tree.nodes if n.parent is not None)
    return {n.id: c.get(n.id, 0) for n in tree.nodes}


def test_tree_shape_obeys_branching_and_depth_rules_statistically() -> None:
    cfg = _cfg(max_depth=4, p_branch=0.5, branch_depths=2)
    curator = InfoCurator(ScriptedLLM(default=_retrieval_only), main_retriever(), cfg)
    branching: dict[int, list[int]] = {0: [], 1: []}
    for i in range(400):
        tree, _ = curator.explore(f"s{i}", "Ada Varn")
        kids = _children(tree)
        for n in tree.nodes:
            assert n.depth <= 4
            if n.depth == 4:
                assert kids[n.id] == 0  # stop at max depth
            elif n.depth >= 2:
                assert kids[n.id] == 1  # p_b = 0 after the first two depths
            else:
                assert kids[n.id] in (1, 2)
                branching[n.depth].append(kids[n.id])
        assert all(len(p) == 5 for p in root_to_leaf_paths(tree))
    for depth, counts in branching.items():
        rate = sum(c == 2 for c in counts) / len(counts)
        assert abs(rate - 0.5) < 0.07, (depth, rate)


def test_tree_extremes_and_determinism() -> None:
    chain = InfoCurator(ScriptedLLM(default=_retrieval_only), main_retriever(), _cfg(max_depth=3, p_branch=0.0))
    tree, _ = chain.explore("s", "Ada Varn")
    assert [n.depth for n in tree.nodes] == [0, 1, 2, 3]
    full = InfoCurator(ScriptedLLM(default=_retrieval_only), main_retriever(), _cfg(max_depth=3, p_branch=1.0))
    tree, _ = full.explore("s", "Ada Varn")
    assert len(root_to_leaf_paths(tree)) == 4
    # depth-first: the first child's whole subtree is created before its sibling
    depth1 = [n for n in tree.nodes if n.depth == 1]
    first_subtree = [n for n in tree.nodes if n.parent == depth1[0].id]
    assert tree.nodes.index(depth1[1]) > tree.nodes.index(first_subtree[-1])
    again, _ = full.explore("s", "Ada Varn")
    assert [n.id for n in again.nodes] == [n.id for n in tree.nodes]


def test_sibling_prompt_asks_for_a_different_direction() -> None:
    llm = ScriptedLLM(default=_retrieval_only)
    InfoCurator(llm, main_retriever(), _cfg(max_depth=1, p_branch=1.0)).explore("s", "Ada Varn")
    assert llm.calls == 2
    assert "Another branch already did" in (llm.requests[1]["messages"][-1].content or "")
    assert llm.requests[0]["messages"] != llm.requests[1]["messages"]


def test_distractor_tool_stores_documents_with_type_source_and_node() -> None:
    cfg = RagShaperConfig()
    cfg.curator.max_depth = 4
    cfg.curator.p_branch = 0.0
    llm = curator_llm()
    tree, docs = InfoCurator(llm, main_retriever(), cfg).explore("s1", "Ada Varn")
    assert tree.distractor_calls == 2
    assert len(docs) == 2 * cfg.distractors.docs_per_call
    assert {d.distractor_type for d in docs} == {"doppelganger", "false_shortcut"}
    by_id = {n.id: n for n in tree.nodes}
    for d in docs:
        node = by_id[d.node_id]
        assert node.action is not None and node.action.name == "write_distractor"
        assert d.id in {r.id for r in node.docs}
        assert d.source_passage_id in {p.id for p in PASSAGES}
        assert d.provenance.stage == "distractor" and d.provenance.raw_output
    # the curator is told its progress toward the quota
    curator_prompts = [r["messages"][-1].content for r in llm.requests
                       if r["response_format"]["json_schema"]["name"] == "curator_action"]
    assert "0 call(s) of 3, 0 document(s) of 5" in curator_prompts[0]
    assert "1 call(s) of 3, 2 document(s) of 5" in curator_prompts[-1]
    # every node carries provenance
    assert all(n.provenance is not None and n.provenance.prompt_hash for n in tree.nodes[1:])


def test_no_distractors_ablation_removes_the_tool() -> None:
    cfg = RagShaperConfig()
    cfg.distractors.enabled = False
    llm = curator_llm()
    tree, docs = InfoCurator(llm, main_retriever(), cfg).explore("s1", "Ada Varn")
    assert docs == [] and tree.distractor_calls == 0
    schema = llm.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["tool"]["enum"] == ["dense_retrieval"]
    assert "write_distractor" not in (llm.requests[0]["messages"][0].content or "")


def test_unparsable_curator_output_ends_the_branch_with_a_flag() -> None:
    tree, _ = InfoCurator(ScriptedLLM(default="not json at all"), main_retriever(), _cfg(p_branch=0.0)).explore(
        "s", "Ada Varn")
    assert len(tree.nodes) == 2
    assert tree.nodes[1].error and "parse_error" in tree.nodes[1].error
    assert tree.nodes[1].provenance is not None and tree.nodes[1].provenance.raw_output == "not json at all"


def _node(i: str, parent: str | None, ndocs: int) -> TreeNode:
    return TreeNode(id=i, parent=parent, docs=[DocRef(id=f"{i}d{j}", text="x") for j in range(ndocs)],
                    action=ToolCall(name="dense_retrieval") if parent else None)


def test_eq5_scores_on_a_hand_built_tree() -> None:
    #        n0(0)
    #     /        \
    #   n1(3)      n4(1)
    #   /   \        \
    # n2(2) n3(0)    n5(5)
    tree = InfoTree(id="t", seed="x", nodes=[_node("n0", None, 0), _node("n1", "n0", 3), _node("n2", "n1", 2),
                                             _node("n3", "n1", 0), _node("n4", "n0", 1), _node("n5", "n4", 5)])
    paths = root_to_leaf_paths(tree)
    assert [[n.id for n in p] for p in paths] == [["n0", "n1", "n2"], ["n0", "n1", "n3"], ["n0", "n4", "n5"]]
    assert [path_score(p) for p in paths] == [5, 3, 6]
    top = select_paths(tree, 2)
    assert [(p.id, p.score, p.rank) for p in top] == [("t-n5", 6, 0), ("t-n2", 5, 1)]
    assert len(select_paths(tree, 5)) == 3


def test_eq5_ties_keep_the_earlier_leaf() -> None:
    tree = InfoTree(id="t", seed="x", nodes=[_node("n0", None, 0), _node("n1", "n0", 2), _node("n2", "n0", 2)])
    assert [p.id for p in select_paths(tree, 1)] == ["t-n1"]


@pytest.mark.parametrize("top_k,expected", [(1, 1), (99, 5)])
def test_curator_top_k_is_clamped(top_k: int, expected: int) -> None:
    reply = json.dumps({"intent": "i", "tool": "dense_retrieval", "query": "Orn", "top_k": top_k})
    tree, _ = InfoCurator(ScriptedLLM(default=reply), main_retriever(), _cfg(max_depth=1, p_branch=0.0)).explore(
        "s", "Ada Varn")
    assert tree.nodes[1].action is not None and tree.nodes[1].action.arguments["top_k"] == expected
