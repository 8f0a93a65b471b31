"""Process-level preference pairs from a finished tree (§2.2.3, for the DPO loss of Eq. 3).

For every expanded node, its children share the prefix (x, y_{<t}) and the same prompt; each
pair of children whose branches reach an answer, whose responses differ, and whose label values
(Eq. 1 at ``alpha_label``) differ by at least ``min_gap`` gives one pair: chosen = the higher.
The prompt is the exact chat the agent sees at that round; chosen / rejected are one assistant
turn each (y_t^w, y_t^l).
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

from agentrag.agents.reason_ground import forced_round, stage_messages
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
                          forced=forced_round(parent.depth, parent.stage, max_iter))


#: the gates of the pairs stage, in the order they are applied to two siblings
PAIR_GATES = ("answerless", "flagged", "same_response", "min_gap")


def extract_pairs(tree: SearchTree, *, alpha_label: float, min_gap: float, max_iter: int,
                  include_untagged: bool = False, rejected: Counter[str] | None = None) -> list[PreferencePair]:
    """The preference pairs of ``tree`` (see the module docstring); sibling-only, answerless
    branches and flagged nodes (untagged ``none`` outputs unless ``include_untagged``) excluded,
    identical responses and gaps below ``min_gap`` dropped. ``rejected`` (when given) counts the
    sibling pairs each gate of :data:`PAIR_GATES` dropped."""
    nodes = tree.by_id()
    drop = pruned(tree)
    tally: Counter[str] = rejected if rejected is not None else Counter()

    def usable(n: TreeNode) -> bool:
        return n.flag is None or (include_untagged and n.action == "none")

    out: list[PreferencePair] = []
    for parent in tree.nodes:
        if len(parent.children) < 2:
            continue
        prompt = None
        for a, b in combinations([nodes[c] for c in parent.children], 2):
            if a.id in drop or b.id in drop:
                tally["answerless"] += 1
                continue
            if not (usable(a) and usable(b)):
                tally["flagged"] += 1
                continue
            if a.response.strip() == b.response.strip():
                tally["same_response"] += 1
                continue
            qa, qb = a.q(alpha_label), b.q(alpha_label)
            gap = qa - qb
            if abs(gap) < min_gap:
                tally["min_gap"] += 1
                continue
            prompt = prompt or prefix_messages(tree, parent, max_iter)
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


__all__ = ["extract_pairs", "pair_type", "prefix_messages", "PAIR_GATES"]
