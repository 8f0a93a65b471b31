"""Process-level preference pairs from a finished tree (§2.2.3, for the DPO loss of Eq. 3).

For every expanded node, its children share the prefix (x, y_{<t}) and the same prompt; each
pair of children whose branches reach an answer, whose responses differ, and whose label values
(Eq. 1 at ``alpha_label``) differ by at least ``min_gap`` gives one pair: chosen = the higher.
The prompt is the exact chat the agent sees at that round; chosen / rejected are one assistant
turn each (y_t^w, y_t^l).
"""

from __future__ import annotations

from itertools import combinations

from agentrag.agents.reason_ground import stage_messages
from agentrag.agents.tools import NO_DOCUMENTS
from agentrag.records import Message, PreferencePair
from agentrag.synth.reasonrag.tree import ACTION_LETTER, SearchTree, TreeNode, pruned


def pair_type(chosen: TreeNode, rejected: TreeNode) -> str:
    """Figure 2a's label: action letters of the chosen and the rejected response, e.g. ``Q-A``."""
    return f"{ACTION_LETTER.get(chosen.action, '?')}-{ACTION_LETTER.get(rejected.action, '?')}"


def prefix_messages(tree: SearchTree, parent: TreeNode, max_iter: int) -> list[Message]:
    """The prompt the children of ``parent`` were sampled from (the agent's round at that state)."""
    y = [n.response for n in tree.path(parent.id)[1:]]
    return stage_messages(tree.question, y, parent.stage, parent.query, parent.documents or NO_DOCUMENTS,
                          forced=parent.depth == max_iter - 1)


def extract_pairs(tree: SearchTree, *, alpha_label: float, min_gap: float, max_iter: int,
                  include_untagged: bool = False) -> list[PreferencePair]:
    """The preference pairs of ``tree`` (see the module docstring); sibling-only, answerless
    branches and flagged nodes (untagged ``none`` outputs unless ``include_untagged``) excluded,
    identical responses and gaps below ``min_gap`` dropped."""
    nodes = tree.by_id()
    drop = pruned(tree)
    out: list[PreferencePair] = []
    for parent in tree.nodes:
        kids = [nodes[c] for c in parent.children if c not in drop and (
            nodes[c].flag is None or (include_untagged and nodes[c].action == "none"))]
        if len(kids) < 2:
            continue
        prompt = prefix_messages(tree, parent, max_iter)
        for a, b in combinations(kids, 2):
            if a.response.strip() == b.response.strip():
                continue
            qa, qb = a.q(alpha_label), b.q(alpha_label)
            gap = qa - qb
            if abs(gap) < min_gap:
                continue
            w, lo = (a, b) if gap > 0 else (b, a)
            out.append(PreferencePair(
                id=f"{tree.id}:{w.id}>{lo.id}", prompt=prompt,
                chosen=[Message(role="assistant", content=w.response)],
                rejected=[Message(role="assistant", content=lo.response)],
                metadata={"question_id": tree.id, "question": tree.question, "golden_answers": tree.golden_answers,
                          "layer": w.depth, "parent_id": parent.id, "chosen_id": w.id, "rejected_id": lo.id,
                          "chosen_action": w.action, "rejected_action": lo.action, "type": pair_type(w, lo),
                          "chosen_value": round(max(qa, qb), 6), "rejected_value": round(min(qa, qb), 6),
                          "gap": round(abs(gap), 6), "prefix": [n.response for n in tree.path(parent.id)[1:]],
                          "stage": parent.stage}))
    return out


__all__ = ["extract_pairs", "pair_type", "prefix_messages"]
