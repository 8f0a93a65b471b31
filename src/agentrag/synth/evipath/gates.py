"""Quality gates on a synthesized path. The paper applies none; these are ours, each counted in
the report with its reason. Every string comparison goes through the matching core
(:mod:`agentrag.match`) via the shared checks (:mod:`agentrag.synth.gates`, composed in
:mod:`.support`); questions of meaning go to the verifier LLM (``verifier``) after them:

- ``path_complete``: the path ended with an answer (no parse/LLM failure, within the budget);
- ``final_answer``: the planner's answer has F1 > threshold against the gold answers;
- ``final_support``: an observation states the final answer (any written form; yes/no only to a
  yes/no question; a number may be computed from stated numbers);
- ``select_subset``: every executor ``<select>`` is non-empty and inside F̂_i (its positions);
- ``sub_answer_support``: every sub-answer sentence is stated by the F̂_i it selected (names and
  numbers lexically, the relation and paraphrase by the verifier);
- ``eq6_floor``: no Eq. 6 argmax fallback below the similarity floor whose evidence does not
  state the sub-answer (a selection that states it is never rejected here);
- ``no_leakage``: the gold answer (any written form, or a distinctive part of a multi-word name)
  is not in the plan or a planner thought/action before an observation showed it; references to
  earlier steps ("#2", "step 2") are no mention; the final answering turn, yes/no answers and
  answers the question itself gives (comparisons) are exempt;
- ``interrogative``: every action is a question (ends with '?');
- ``self_contained``: no action keeps a placeholder (``#1``, ``[X]``) or an unresolved pronoun;
- ``hops``: no sub-question asked twice (near-duplicates), and the number of distinct
  sub-questions is at least the dataset's hop count;
- ``both_sides``: a comparison searched every entity it compares (the gold titles the question
  names);
- ``thoughts``: no planner or executor thought has synthesis-only wording ("golden evidence",
  "reference answer"), degenerate repetition, or a name or number that neither the evidence it
  has seen, the question nor the plan states (then the verifier: every fact supported);
- ``no_synthesis_wording``: kept as its own count (a subset of ``thoughts``).
"""

from __future__ import annotations

import re
from typing import Any

from agentrag.eval.metrics import f1
from agentrag.match import mentions
from agentrag.synth.evipath.config import GateConfig
from agentrag.synth.evipath.schema import EviItem, GateRecord, IterationRecord, PlanRecord, SelectionRecord
from agentrag.synth.evipath.support import (
    final_answer_unsupported,
    given_by_question,
    is_yes_no,
    leaks,
    not_self_contained,
    sub_answer_problem,
    synthesis_wording,
    thought_problem,
)
from agentrag.synth.gates import distinct_count, one_sided, repeated

GATES = ("path_complete", "final_answer", "final_support", "select_subset", "sub_answer_support", "eq6_floor",
         "no_leakage", "interrogative", "self_contained", "hops", "both_sides", "no_synthesis_wording", "thoughts")
_DISAMBIGUATION = re.compile(r"\s*\([^)]*\)\s*$")


def leaked(item: EviItem, plan: PlanRecord, iterations: list[IterationRecord]) -> str | None:
    """Where the gold answer shows up before an observation showed it, or None. The final
    answering turn (an answer, no action) is where the answer belongs and is not checked; yes/no
    answers are judgements, not facts to leak; an answer the question itself gives (comparisons:
    "A or B?") is given, not leaked."""
    answers = [a for a in item.answers if not is_yes_no(a)]
    if not answers or any(given_by_question(item.question, a, item.answers) for a in answers):
        return None
    for k, q in enumerate(plan.plan, start=1):
        if leaks(answers, item.question, q, ""):
            return f"plan step {k}"
    seen = ""
    for it in iterations:
        if it.answer is not None and not it.actions:
            break
        if leaks(answers, item.question, it.thought, seen):
            return f"thought of iteration {it.n}"
        for q in it.actions:
            if leaks(answers, item.question, q, seen):
                return f"action of iteration {it.n}"
        seen += "\n" + "\n".join(it.observations)
    return None


def hops_problem(actions: list[str], hops: int) -> str | None:
    """``hops``: no sub-question asked twice (near-duplicates), and at least ``hops`` distinct ones."""
    again = repeated(actions)
    if again:
        return again
    n = distinct_count(actions)
    return None if n >= hops else f"{n} distinct sub-questions < {hops} hops"


def compared(item: EviItem) -> list[str]:
    """The entities a comparison compares: for a comparison (a yes/no answer, an answer the
    question gives, or a dataset type that says so), the gold titles (disambiguation dropped) the
    question names, when it names two or more."""
    kind = str(item.metadata.get("type", ""))
    if not ("comparison" in kind or is_yes_no(item.answer) or given_by_question(item.question, item.answer)):
        return []
    titles = dict.fromkeys(_DISAMBIGUATION.sub("", f.title) for f in item.gold_facts() if f.title)
    named = [t for t in titles if t and mentions(t, item.question)]
    return named if len(named) >= 2 else []


def selection_ok(sel: SelectionRecord) -> str | None:
    """``select_subset``: the executor selected a non-empty subset of F̂_i."""
    if sel.status != "ok" or sel.select is None:
        return sel.reason or "no selection"
    if not sel.select:
        return "empty <select>"
    extra = sorted(set(sel.select) - set(sel.gold_positions))
    return f"selected {extra} outside F̂_i {sel.gold_positions}" if extra else None


def sub_answer_unsupported(sel: SelectionRecord, verifier: Any = None) -> str | None:
    """``sub_answer_support``: the sub-answer sentence is stated by its F̂_i."""
    problem = sub_answer_problem(sel.answer, sel.supporting, sel.question, verifier)
    return f"{sel.answer!r}: {problem}" if problem else None


def below_floor(sel: SelectionRecord, floor: float) -> str | None:
    """``eq6_floor``: an argmax fallback (footnote 1) too dissimilar to count as evidence, whose
    evidence does not state the sub-answer either (lexically)."""
    best = max(sel.similarities, default=0.0)
    if not (sel.fallback and best < floor) or sub_answer_problem(sel.answer, sel.supporting, sel.question) is None:
        return None
    return f"Eq. 6 fallback similarity {best:.3f} < floor {floor}"


def selection_problems(sel: SelectionRecord, cfg: GateConfig, verifier: Any = None) -> dict[str, str]:
    """The failed per-selection gates of one executor record: {gate: problem}."""
    out: dict[str, str | None] = {"select_subset": selection_ok(sel)}
    if cfg.check_support:
        out["sub_answer_support"] = sub_answer_unsupported(sel, verifier)
        out["eq6_floor"] = below_floor(sel, cfg.fallback_floor)
    if cfg.check_wording:
        word = synthesis_wording(sel.thought)
        out["no_synthesis_wording"] = f"executor thought: {word}" if word else None
        problem = word or thought_problem(sel.thought, sel.evidence, question=sel.question, answer=sel.answer,
                                          verifier=verifier, stage="gates")
        out["thoughts"] = f"executor thought: {problem}" if problem else None
    return {k: v for k, v in out.items() if v}


def planner_thought_problems(item: EviItem, plan: PlanRecord, iterations: list[IterationRecord],
                             verifier: Any = None) -> str | None:
    """The first planner thought with synthesis-only wording, degenerate repetition or a fact
    that neither the observations before it, the question, the plan nor the sub-questions it
    asks state."""
    seen: list[str] = list(plan.plan)
    for it in iterations:
        final = it.answer is not None and not it.actions
        problem = thought_problem(it.thought, seen + it.actions, question=item.question, answer=it.answer or "",
                                  verifier=verifier, stage="gates") if it.thought else None
        if problem:
            return f"thought of iteration {it.n}: {problem}"
        seen += it.actions + it.observations
        if final:
            break
    return None


def self_contained_problem(item: EviItem, actions: list[str], verifier: Any = None) -> str | None:
    """``self_contained``: the first sub-question with a placeholder or an unresolved pronoun; a
    pronoun inside a title of the item's evidence, in any case, is part of that title (annotators
    write "who sang do they know it's christmas?")."""
    titles = list(dict.fromkeys(t for f in item.facts if f.title for t in (f.title, _DISAMBIGUATION.sub("", f.title))))
    for q in actions:
        why = not_self_contained(q, titles, verifier)
        if why:
            return f"{why} in {q!r}"
    return None


def check_path(item: EviItem, plan: PlanRecord, iterations: list[IterationRecord],
               selections: list[SelectionRecord], cfg: GateConfig, verifier: Any = None) -> GateRecord:
    """Run every gate on one item's path (``verifier``: the LLM asked the questions of meaning
    after the lexical checks; None: lexical only)."""
    checks: dict[str, bool] = {}
    reasons: list[str] = []

    def gate(name: str, problem: str | None) -> None:
        checks[name] = problem is None
        if problem is not None:
            reasons.append(f"{name}: {problem}")

    final = iterations[-1] if iterations else None
    complete = final is not None and final.status == "ok" and final.answer is not None
    gate("path_complete", None if complete else ((final.reason if final else None) or "no iterations"))
    prediction = final.answer if complete and final else None
    score = f1(prediction, item.answers) if prediction else 0.0
    gate("final_answer", None if score > cfg.f1_threshold else f"f1={score:.3f} <= {cfg.f1_threshold}")
    good = checks["path_complete"] and checks["final_answer"]
    v = verifier if good else None  # a rejected path costs no verifier call
    if cfg.check_support:
        observations = [o for it in iterations for o in it.observations]
        gate("final_support", final_answer_unsupported(prediction, observations, item.question, item.answers, v)
             if prediction else "no final answer")
    actions = [q for it in iterations for q in it.actions]
    per_sel = {s.id: selection_problems(s, cfg, v) for s in selections}

    def sel_gate(name: str) -> None:
        problems = [f"{k}: {p[name]}" for k, p in per_sel.items() if name in p]
        if name == "select_subset" and actions and not selections:
            problems.append("no selections")
        gate(name, "; ".join(problems) if problems else None)

    sel_gate("select_subset")
    if cfg.check_support:
        sel_gate("sub_answer_support")
        sel_gate("eq6_floor")
    if cfg.check_leakage:
        where = leaked(item, plan, iterations)
        gate("no_leakage", f"gold answer in the {where} before any observation returned it" if where else None)
    if cfg.check_interrogative:
        bad_q = [q for q in actions if not q.rstrip().endswith("?")]
        gate("interrogative", f"not a question: {bad_q[0]!r}" if bad_q else None)
    if cfg.check_self_contained:
        gate("self_contained", self_contained_problem(item, actions, v))
    if cfg.check_hops:
        gate("hops", hops_problem(actions, item.hops))
        entities = compared(item)
        gate("both_sides", one_sided(entities, actions) if entities else None)
    if cfg.check_wording:
        said = [(it.n, w) for it in iterations if (w := synthesis_wording(it.thought))]
        sel_words = [p["no_synthesis_wording"] for p in per_sel.values() if "no_synthesis_wording" in p]
        gate("no_synthesis_wording", f"thought of iteration {said[0][0]}: {said[0][1]}" if said
             else (sel_words[0] if sel_words else None))
        sel_thoughts = [f"{k}: {p['thoughts']}" for k, p in per_sel.items() if "thoughts" in p]
        gate("thoughts", planner_thought_problems(item, plan, iterations, v)
             or (sel_thoughts[0] if sel_thoughts else None))
    bad = {k: p for k, p in per_sel.items() if p}
    return GateRecord(id=item.id, passed=all(checks.values()), checks=checks, reasons=reasons, prediction=prediction,
                      f1=round(score, 4), n_subquestions=len(actions), hops=item.hops,
                      executor_kept=[k for k in per_sel if k not in bad])


__all__ = ["GATES", "check_path", "leaked", "hops_problem", "compared", "selection_ok", "selection_problems", "sub_answer_unsupported",
           "below_floor", "planner_thought_problems", "self_contained_problem"]
