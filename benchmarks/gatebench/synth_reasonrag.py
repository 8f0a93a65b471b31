"""ReasonRAG's gates in the benchmark: the real code of the MCTS steps and pairs.

- ``step`` (task ``protocol``): what :func:`agentrag.agents.reason_ground.parse_step` (the one
  protocol parser the tree uses) makes of a raw turn. The raw turn is kept as a pair side only when
  it is a well-formed step and nothing of it lies outside the step: a malformed turn is never a
  side (gate ``malformed``) and text after the step's closing tag is cut away (never exported).
  The case's text is a complete output (``stopped=False``: no stop sequence cut it, so an open
  ``<query>`` is unclosed).
- ``documents`` (task ``neutralize``): a document reaches the tree's prompts as
  :func:`agentrag.agents.tools.format_documents` (``neutralize=True``) shows it; rejected when it
  carries chat-template control tokens and none of them reaches the model as written.
- ``pair_sides`` (task ``near_duplicate``): :func:`agentrag.synth.reasonrag.pairs.near_duplicate_actions`
  on two sibling steps with these texts (gate ``near_duplicate`` of the pairs stage).
"""

from __future__ import annotations

from typing import Any

from agentrag.agents.reason_ground import parse_step
from agentrag.agents.tools import format_documents
from agentrag.protocol import CONTROL_TOKEN_RE
from agentrag.records import Hit
from agentrag.synth.reasonrag.pairs import near_duplicate_actions
from agentrag.synth.reasonrag.tree import TreeNode
from gatebench.cases import Case, Gate


def _step(c: Case, v: Any) -> bool:
    step = parse_step(c.text, stopped=False)
    return step.action is not None and step.malformed is None and step.text == c.text.strip()


def _documents(c: Case, v: Any) -> bool:
    shown = format_documents([Hit(id="d", title="", text=c.text, score=1.0)], neutralize=True)
    forged = CONTROL_TOKEN_RE.findall(" ".join(c.text.split()))
    # rejected: the document carried control tokens and none of them reaches the model as written
    return not (forged and not any(t in shown for t in forged))


def _sides(c: Case, v: Any) -> bool:
    if c.task != "near_duplicate":
        return True
    a = TreeNode(id="r.0", parent="r", depth=1, action="none", response=c.text)
    b = TreeNode(id="r.1", parent="r", depth=1, action="none", response=c.other)
    return not near_duplicate_actions(a, b)


GATES = [
    Gate("reasonrag", "step", ("protocol",), _step),
    Gate("reasonrag", "documents", ("neutralize",), _documents),
    Gate("reasonrag", "pair_sides", ("near_duplicate",), _sides),
]
