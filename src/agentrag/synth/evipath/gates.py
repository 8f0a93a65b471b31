"""Quality gates on a synthesized path. The paper applies none; these are ours, each counted in
the report with its reason (the word-level checks live in :mod:`.support`):

- ``path_complete``: the path ended with an answer (no parse/LLM failure, within the budget);
- ``final_answer``: the planner's answer has F1 > threshold against the gold answers;
- ``final_support``: the final answer is supported by the observations (yes/no and numbers
  computed from numbers in the observations are accepted);
- ``select_subset``: every executor ``<select>`` is non-empty and inside F̂_i (its positions);
- ``sub_answer_support``: every sub-answer's new content words are in the F̂_i it selected;
- ``eq6_floor``: no Eq. 6 argmax fallback below the similarity floor;
- ``no_leakage``: the gold answer's words do not appear in the plan or a planner thought/action
  before an observation returned them (word tokens: "Oslo-born" and "Oslo's" name Oslo); the
  final answering turn, yes/no answers and answers the question itself names are exempt;
- ``interrogative``: every action is a question (ends with '?');
- ``self_contained``: no action keeps a placeholder (``#1``, ``[X]``) or an unresolved pronoun;
- ``hops``: the number of sub-questions is at least the dataset's hop count;
- ``no_synthesis_wording``: no thought says "golden evidence", "you know the answer", ...
"""

from __future__ import annotations

from agentrag.eval.metrics import f1
from agentrag.synth.evipath.config import GateConfig
from agentrag.synth.evipath.schema import EviItem, GateRecord, IterationRecord, PlanRecord, SelectionRecord
from agentrag.synth.evipath.support import (
    final_answer_unsupported,
    is_yes_no,
    missing_words,
    names,
    not_self_contained,
    synthesis_wording,
)

GATES = ("path_complete", "final_answer", "final_support", "select_subset", "sub_answer_support", "eq6_floor",
         "no_leakage", "interrogative", "self_contained", "hops", "no_synthesis_wording")
_contains = names


def leaked(item: EviItem, plan: PlanRecord, iterations: list[IterationRecord]) -> str | None:
    """Where the gold answer's words show up before an observation returned them, or None. The
    final answering turn (an answer, no action) is where the answer belongs and is not checked;
    yes/no answers are judgements, not facts to leak; an answer the question itself names
    (comparisons: "A or B?") is given, not leaked."""
    answers = [a for a in item.answers if not is_yes_no(a) and not _contains(item.question, a)]
    seen_in_obs = False
    for k, q in enumerate(plan.plan, start=1):
        if any(_contains(q, a) for a in answers):
            return f"plan step {k}"
    for it in iterations:
        if it.answer is not None and not it.actions:
            break
        if not seen_in_obs:
            for a in answers:
                if _contains(it.thought, a):
                    return f"thought of iteration {it.n}"
                if any(_contains(q, a) for q in it.actions):
                    return f"action of iteration {it.n}"
        if any(_contains(o, a) for o in it.observations for a in answers):
            seen_in_obs = True
    return None


def selection_ok(sel: SelectionRecord) -> str | None:
    """``select_subset``: the executor selected a non-empty subset of F̂_i."""
    if sel.status != "ok" or sel.select is None:
        return sel.reason or "no selection"
    if not sel.select:
        return "empty <select>"
    extra = sorted(set(sel.select) - set(sel.gold_positions))
    return f"selected {extra} outside F̂_i {sel.gold_positions}" if extra else None


def sub_answer_unsupported(sel: SelectionRecord) -> str | None:
    """``sub_answer_support``: the sub-answer's new content words are all in its F̂_i."""
    missing = missing_words(sel.answer, sel.supporting, sel.question)
    return f"{sel.answer!r}: {missing} not in its selected evidence" if missing else None


def below_floor(sel: SelectionRecord, floor: float) -> str | None:
    """``eq6_floor``: an argmax fallback (footnote 1) too dissimilar to count as evidence."""
    best = max(sel.similarities, default=0.0)
    return f"Eq. 6 fallback similarity {best:.3f} < floor {floor}" if sel.fallback and best < floor else None


def selection_problems(sel: SelectionRecord, cfg: GateConfig) -> dict[str, str]:
    """The failed per-selection gates of one executor record: {gate: problem}."""
    out: dict[str, str | None] = {"select_subset": selection_ok(sel)}
    if cfg.check_support:
        out["sub_answer_support"] = sub_answer_unsupported(sel)
        out["eq6_floor"] = below_floor(sel, cfg.fallback_floor)
    if cfg.check_wording:
        word = synthesis_wording(sel.thought)
        out["no_synthesis_wording"] = f"executor thought says {word!r}" if word else None
    return {k: v for k, v in out.items() if v}


def check_path(item: EviItem, plan: PlanRecord, iterations: list[IterationRecord],
               selections: list[SelectionRecord], cfg: GateConfig) -> GateRecord:
    """Run every gate on one item's path."""
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
    if cfg.check_support:
        observations = [o for it in iterations for o in it.observations]
        gate("final_support", final_answer_unsupported(prediction, observations, item.question) if prediction
             else "no final answer")
    actions = [q for it in iterations for q in it.actions]
    per_sel = {s.id: selection_problems(s, cfg) for s in selections}

    def sel_gate(name: str) -> None:
        problems = [f"{k}: {v[name]}" for k, v in per_sel.items() if name in v]
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
        unresolved = [(q, why) for q in actions if (why := not_self_contained(q))]
        gate("self_contained", f"{unresolved[0][1]} in {unresolved[0][0]!r}" if unresolved else None)
    if cfg.check_hops:
        gate("hops", None if len(actions) >= item.hops else f"{len(actions)} sub-questions < {item.hops} hops")
    if cfg.check_wording:
        said = [(it.n, w) for it in iterations if (w := synthesis_wording(it.thought))]
        sel_words = [v["no_synthesis_wording"] for v in per_sel.values() if "no_synthesis_wording" in v]
        gate("no_synthesis_wording", f"thought of iteration {said[0][0]} says {said[0][1]!r}" if said
             else (sel_words[0] if sel_words else None))
    bad = {k: v for k, v in per_sel.items() if v}
    return GateRecord(id=item.id, passed=all(checks.values()), checks=checks, reasons=reasons, prediction=prediction,
                      f1=round(score, 4), n_subquestions=len(actions), hops=item.hops,
                      executor_kept=[k for k in per_sel if k not in bad])


__all__ = ["GATES", "check_path", "leaked", "selection_ok", "selection_problems", "sub_answer_unsupported",
           "below_floor"]
