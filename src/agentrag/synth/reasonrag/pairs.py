"""Process-level preference pairs from a finished tree (§2.2.3, for the DPO loss of Eq. 3).

For every expanded node, its children share the prefix (x, y_{<t}) and the same prompt; each
pair of children that are well-formed steps (a malformed turn, :mod:`agentrag.protocol`, is never
a side), whose branches reach an answer, whose responses differ, whose actions differ
(:func:`action_key`: the action and its normalised query / answer / evidence), whose actions are not
near-duplicates (:func:`agentrag.match.near_duplicate` on the two contents: the same query, answer or
evidence up to a possessive, punctuation, case or word order), and whose label values (Eq. 1 at
``alpha_label``) differ by at least ``min_gap`` gives one pair: chosen = the higher.
The prompt is the exact chat the agent sees at that round; chosen / rejected are one assistant
turn each (y_t^w, y_t^l).
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

from agentrag.agents.reason_ground import forced_round, stage_messages
from agentrag.agents.tools import NO_DOCUMENTS
from agentrag.match import near_duplicate
from agentrag.match.canon import canonical
from agentrag.records import Message, PreferencePair
from agentrag.synth.reasonrag.tree import ACTION_LETTER, Estimate, SearchTree, TreeNode, pruned, q_value


def pair_type(chosen: TreeNode, rejected: TreeNode) -> str:
    """Figure 2a's label: action letters of the chosen and the rejected response, e.g. ``Q-A``."""
    return f"{ACTION_LETTER.get(chosen.action, '?')}-{ACTION_LETTER.get(rejected.action, '?')}"


def prefix_messages(tree: SearchTree, parent: TreeNode, max_iter: int) -> list[Message]:
    """The prompt the children of ``parent`` were sampled from (the agent's round at that state)."""
    y = [n.response for n in tree.path(parent.id)[1:]]
    return stage_messages(tree.question, y, parent.stage, parent.query, parent.documents or NO_DOCUMENTS,
                          forced=forced_round(parent.depth, parent.stage, max_iter))


#: the gates of the pairs stage, in the order they are applied to two siblings
PAIR_GATES = ("malformed", "answerless", "flagged", "same_response", "same_action", "near_duplicate", "min_gap")


def action_key(node: TreeNode) -> tuple[str, str]:
    """What a step does, normalised: its action and its content in canonical tokens of the shared
    matching core (:func:`agentrag.match.canon.canonical`; the query text, the answer, the evidence; the
    whole response for an untagged step). Two siblings with the same key
    take the same action in different words: their value gap is rollout noise, not a preference."""
    content = node.answer if node.action == "answer" else node.content
    return node.action, canonical(content if content is not None else node.response)


def near_duplicate_actions(a: TreeNode, b: TreeNode) -> bool:
    """Whether two siblings take the same action with near-duplicate content (the shared matching
    core's :func:`agentrag.match.near_duplicate` on their queries / answers / evidence, on the whole
    responses for untagged steps): their value gap is rollout noise, not a preference."""
    if a.action != b.action:
        return False

    def content(n: TreeNode) -> str:
        value = n.answer if n.action == "answer" else n.content
        return value if value is not None else n.response
    return near_duplicate(content(a), content(b))


def outcome_estimates(tree: SearchTree) -> dict[str, list[Estimate]]:
    """Per node, the outcome reward of every terminal leaf in its subtree (F1 of its answer, 0 for
    an answerless forced leaf) with that leaf's steps: the §2.2.3 labels when the judge guided the
    search (its scores steer selection only)."""
    out: dict[str, list[Estimate]] = {n.id: [] for n in tree.nodes}
    for leaf in tree.nodes:
        if leaf.id == "r" or not leaf.terminal:
            continue
        est = Estimate(v=leaf.score or 0.0, steps=leaf.depth, answer=leaf.answer, origin=leaf.id)
        for n in tree.path(leaf.id):
            out[n.id].append(est)
    return out


def extract_pairs(tree: SearchTree, *, alpha_label: float, min_gap: float, max_iter: int,
                  include_untagged: bool = False, rejected: Counter[str] | None = None,
                  labels: str = "spre") -> list[PreferencePair]:
    """The preference pairs of ``tree`` (see the module docstring); sibling-only, malformed turns,
    answerless branches and flagged nodes (untagged ``none`` outputs unless ``include_untagged``)
    excluded, identical responses, the same normalised action, near-duplicate actions and gaps below
    ``min_gap`` dropped. The label
    value is Eq. 1 at ``alpha_label`` over the node's SPRE rollouts (``labels="spre"``) or, when the
    judge valued the nodes (``labels="judge"``), over the outcome rewards of the terminal leaves
    below it (:func:`outcome_estimates`). ``rejected`` (when given) counts the sibling pairs each
    gate of :data:`PAIR_GATES` dropped."""
    nodes = tree.by_id()
    drop = pruned(tree)
    outcomes = outcome_estimates(tree) if labels == "judge" else None

    def label(n: TreeNode) -> float:
        return q_value(outcomes[n.id], alpha_label) if outcomes is not None else n.q(alpha_label)
    tally: Counter[str] = rejected if rejected is not None else Counter()

    def usable(n: TreeNode) -> bool:
        return n.flag is None or (include_untagged and n.action == "none")

    out: list[PreferencePair] = []
    for parent in tree.nodes:
        if len(parent.children) < 2:
            continue
        prompt = None
        for a, b in combinations([nodes[c] for c in parent.children], 2):
            if a.action == "malformed" or b.action == "malformed" or _malformed(a) or _malformed(b):
                tally["malformed"] += 1
                continue
            if a.id in drop or b.id in drop:
                tally["answerless"] += 1
                continue
            if not (usable(a) and usable(b)):
                tally["flagged"] += 1
                continue
            if a.response.strip() == b.response.strip():
                tally["same_response"] += 1
                continue
            if action_key(a) == action_key(b):
                tally["same_action"] += 1
                continue
            if near_duplicate_actions(a, b):
                tally["near_duplicate"] += 1
                continue
            qa, qb = label(a), label(b)
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


def _malformed(n: TreeNode) -> bool:
    """A node made by a malformed turn (a forced round's malformed output is an answerless leaf)."""
    return (n.flag or "").startswith("malformed turn")


__all__ = ["near_duplicate_actions", "extract_pairs", "pair_type", "prefix_messages", "PAIR_GATES", "action_key", "outcome_estimates"]
