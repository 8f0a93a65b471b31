"""Labeled gate cases and the scoring of a gate over them.

A :class:`Case` is one input to a gate with the decision a correct gate makes (``label``:
``"reject"`` for an adversarial variant, ``"keep"`` for a valid one). Cases are grouped in
*families* (one kind of mutation, both ways) and *tasks* (what is asked of the gate: is the answer
supported, does a query leak the answer, is this a no-answer, ...). ``semantic`` marks cases that
strings cannot decide: a gate passes them only with the verifier.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from agentrag.llm.base import Completion
from agentrag.records import Message, Usage
from agentrag.synth.verifier import CHECKS

TASKS = ("support", "leakage", "no_answer", "near_duplicate", "repeat", "thought", "comparison", "single_document",
         "protocol", "neutralize", "distractor", "question",
         "distractor_type", "answer_form", "pronoun")


@dataclass
class Case:
    family: str
    task: str
    label: str  # "reject" | "keep"
    variant: str
    item_id: str = ""
    question: str = ""
    answer: str = ""
    aliases: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # what the gate may read (documents / observations)
    distractors: list[str] = field(default_factory=list)
    text: str = ""  # the text under test (a query, a thought, a raw turn, a pair side, a document)
    other: str = ""  # a second text (the other pair side, the source document)
    queries: list[str] = field(default_factory=list)  # searches / sub-questions in order
    entities: list[str] = field(default_factory=list)  # compared entities
    cut: int | None = None  # characters of each document the agent was shown
    semantic: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class LabelVerifier:
    """The benchmark's scripted verifier: it answers every question from the case's label, as a
    strong verifier model would (the benchmark's stand-in; never used by a pipeline)."""

    model = "label-verifier"

    def __init__(self, label: str) -> None:
        self.label = label
        self.calls = 0

    def chat(self, messages: list[Message], tools: Any = None, response_format: Any = None, n: int = 1,
             **sampling: Any) -> list[Completion]:
        self.calls += 1
        user = str(messages[-1].content or "")
        keep_if = True
        for check in CHECKS.values():
            head = re.split(r"\{", check.statement, maxsplit=1)[0][:40]
            if head and head in user:
                keep_if = check.keep_if
                break
        holds = keep_if if self.label == "keep" else not keep_if
        text = json.dumps({"holds": holds, "reason": f"label {self.label}"})
        return [Completion(text=text, finish_reason="stop", usage=Usage(calls=1))] * n


#: a gate under test: (case, verifier or None) -> True to keep the item, False to reject it
GateFn = Callable[[Case, Any], bool]


@dataclass
class Gate:
    synth: str
    name: str
    tasks: tuple[str, ...]
    decide: GateFn


def score(gates: Iterable[Gate], cases: list[Case], *, verifier: bool) -> list[dict[str, Any]]:
    """One row per synthesizer x gate x family: cases, precision and recall of the rejections,
    false-rejection rate of the valid variants."""
    rows = []
    by_task: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        by_task[c.task].append(c)
    for gate in gates:
        tally: dict[str, dict[str, int]] = defaultdict(lambda: {"tp": 0, "fn": 0, "fp": 0, "tn": 0})
        for task in gate.tasks:
            for c in by_task.get(task, []):
                keep = gate.decide(c, LabelVerifier(c.label) if verifier else None)
                t = tally[c.family]
                if c.label == "reject":
                    t["tp" if not keep else "fn"] += 1
                else:
                    t["fp" if not keep else "tn"] += 1
        for family, t in sorted(tally.items()):
            rejected, adversarial, valid = t["tp"] + t["fp"], t["tp"] + t["fn"], t["fp"] + t["tn"]
            rows.append({"synth": gate.synth, "gate": gate.name, "family": family, "cases": adversarial + valid,
                         "adversarial": adversarial, "valid": valid,
                         "precision": t["tp"] / rejected if rejected else 1.0,
                         "recall": t["tp"] / adversarial if adversarial else 1.0,
                         "false_rejection": t["fp"] / valid if valid else 0.0})
    return rows


__all__ = ["TASKS", "Case", "LabelVerifier", "GateFn", "Gate", "score"]
