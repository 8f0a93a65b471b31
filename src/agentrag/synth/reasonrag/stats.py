"""The run's statistics (Table 1 and Figure 2 of the paper) and its report sections."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from agentrag.eval.metrics import f1
from agentrag.records import PreferencePair, Trajectory
from agentrag.synth.reasonrag.tree import IterationEvent, SearchTree, pruned


def summary(values: Sequence[float]) -> dict[str, float | None]:
    """avg / min / med / max (``None`` for an empty list)."""
    if not values:
        return {"avg": None, "min": None, "med": None, "max": None}
    return {"avg": round(statistics.fmean(values), 3), "min": min(values), "med": statistics.median(values),
            "max": max(values)}


def _bin(v: float, width: float = 0.1) -> int:
    """The :func:`histogram` bin of ``v``."""
    bins = int(round(1 / width))
    return min(bins - 1, max(0, int(v / width)))


def _bins(counts: Sequence[int], width: float = 0.1) -> dict[str, int]:
    return {f"{i * width:.1f}-{(i + 1) * width:.1f}": c for i, c in enumerate(counts)}


def histogram(values: Iterable[float], width: float = 0.1) -> dict[str, int]:
    """Counts per bin ``[lo, lo + width)`` over [0, 1] (the last bin holds 1.0)."""
    bins = int(round(1 / width))
    counts = [0] * bins
    for v in values:
        counts[_bin(v, width)] += 1
    return _bins(counts, width)


def run_statistics(trees: Iterable[SearchTree], events: Iterable[IterationEvent], pairs: Iterable[PreferencePair],
                   greedy: Iterable[Trajectory], *, tree_ids: Collection[str] | None = None) -> dict[str, Any]:
    """Everything the report shows, as plain JSON. ``events``, ``pairs``, ``greedy`` and ``trees``
    are read once each, in this order, record by record (a :class:`~agentrag.runs.JsonlStore`
    streams its file): memory holds counters, per tree its id and small numbers (iterations,
    depths and token counts of its nodes, the row of the per-question table), never a list of
    trees, events or pairs. ``tree_ids``: the ids of ``trees`` (which greedy answers to keep);
    without it ``trees`` is read into a list to take them."""
    if tree_ids is None:
        trees = list(trees)
        tree_ids = {t.id for t in trees}
    calls_by_q: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for ev in events:
        calls_by_q[ev.question_id] += ev.usage.calls + (ev.node.value_usage.calls if ev.node else 0)
        outcomes[ev.outcome] += 1
    n_pairs = 0
    pairs_by_q: Counter[str] = Counter()
    pair_types: Counter[str] = Counter()
    pair_layers: Counter[str] = Counter()
    gaps = [0] * 10
    for p in pairs:
        n_pairs += 1
        pairs_by_q[str(p.metadata.get("question_id"))] += 1
        pair_types[str(p.metadata.get("type"))] += 1
        pair_layers[str(p.metadata.get("layer"))] += 1
        gaps[_bin(float(p.metadata.get("gap", 0.0)))] += 1
    greedy_answer: dict[str, str | None] = {}  # the greedy answer of each tree's question, no trajectory
    greedy_calls = 0
    for g in greedy:
        greedy_calls += g.usage.calls
        if g.id in tree_ids:
            greedy_answer[g.id] = g.answer
    n_trees = 0
    status: Counter[str] = Counter()
    actions: Counter[str] = Counter()
    actions_kept: Counter[str] = Counter()
    iterations: list[int] = []
    rounds: list[int] = []
    tokens: list[int] = []
    compare: list[dict[str, Any]] = []
    for t in trees:  # one tree at a time: only its numbers are kept
        n_trees += 1
        status[t.status] += 1
        iterations.append(t.iterations)
        cut = pruned(t)
        for n in t.nodes:
            if n.id == "r":
                continue
            actions[n.action] += 1
            tokens.append(n.usage.completion_tokens)
            if n.id not in cut:
                actions_kept[n.action] += 1
        leaves = t.answer_leaves()
        rounds.extend(n.depth for n in leaves)
        has_greedy = t.id in greedy_answer
        answer = greedy_answer.get(t.id)
        compare.append({"question_id": t.id, "best_leaf_f1": max((n.score or 0.0 for n in leaves), default=0.0),
                        "answer_leaves": len(leaves),
                        "greedy_answer": answer,
                        "greedy_f1": f1(answer, t.golden_answers) if has_greedy else None})
    greedy_f1: list[float] = [c["greedy_f1"] for c in compare if c["greedy_f1"] is not None]
    total_calls = sum(calls_by_q.values())
    return {
        "questions": n_trees,
        "status": dict(status),
        "actions": dict(actions),
        "actions_kept": dict(actions_kept),
        "outcomes": dict(outcomes),
        "mcts_iterations": summary(iterations),
        "reasoning_rounds_of_answer_leaves": summary(rounds),
        "response_tokens": summary(tokens),
        "pairs": n_pairs,
        "pairs_per_question": round(n_pairs / n_trees, 3) if n_trees else None,
        "pair_types": dict(pair_types),
        "pair_layers": dict(pair_layers),
        "reward_gap_histogram": _bins(gaps),
        "llm_calls": {"total": total_calls,
                      "per_question": round(total_calls / n_trees, 2) if n_trees else None,
                      "per_kept_pair": round(total_calls / n_pairs, 2) if n_pairs else None,
                      "by_question": dict(calls_by_q),
                      "greedy_baseline": greedy_calls},
        "pairs_by_question": dict(pairs_by_q),
        "best_leaf_vs_greedy": {
            "mean_best_leaf_f1": round(statistics.fmean([c["best_leaf_f1"] for c in compare]), 3) if compare else None,
            "mean_greedy_f1": round(statistics.fmean(greedy_f1), 3) if greedy_f1 else None,
            "per_question": compare},
    }


def funnel_section(m: dict[str, Any]) -> dict[str, Any]:
    """The driver's funnel (one row per declared stage) and the unfinished questions."""
    rows = [[f["stage"], f["input"], f["output"], f["in"], f["out"],
             ", ".join(f"{k} {v}" for k, v in sorted(f["rejected"].items())) or "-", f["unfinished"]]
            for f in m.get("funnel", [])]
    text = (f"{m.get('unfinished', 0)} question(s) unfinished (an outage or a bug); rerun the same command to "
            f"finish them: {', '.join(sorted(m.get('unfinished_items', {})))}" if m.get("unfinished") else
            "every question finished")
    return {"title": "Funnel", "text": f"{text}; wall time {m.get('wall_s')} s",
            "headers": ["stage", "input", "output", "in", "out", "rejected", "unfinished"], "rows": rows}


def llm_section(m: dict[str, Any]) -> dict[str, Any]:
    """The run's LLM usage (the driver's ``llm`` block: one row per LLM object, keyed by its roles)."""
    keys = sorted({k for stats in m.get("llm", {}).values() for k, v in stats.items()
                   if not isinstance(v, (dict, list))})
    return {"title": "LLM usage", "headers": ["roles", *keys],
            "rows": [[roles, *[stats.get(k) for k in keys]] for roles, stats in m.get("llm", {}).items()]}


def report_sections(m: dict[str, Any]) -> list[dict[str, Any]]:
    """Markdown/HTML report sections of ``metrics.json`` (the driver's keys and :func:`run_statistics`)."""
    def row(name: str, s: dict[str, Any]) -> list[Any]:
        return [name, s["avg"], s["min"], s["med"], s["max"]]

    actions = m["actions"]
    total = sum(actions.values()) or 1
    secs: list[dict[str, Any]] = [
        funnel_section(m),
        {"title": "Dataset statistics (Table 1)",
         "headers": ["statistic", "value"],
         "rows": [["questions", m["questions"]], ["preference pairs", m["pairs"]],
                  ["pairs per question", m["pairs_per_question"]],
                  *[[f"action: {a}", f"{c} ({100 * c / total:.1f}%)"] for a, c in sorted(actions.items())],
                  ["actions on answer-reaching branches", sum(m["actions_kept"].values())],
                  ["LLM calls (tree: expansions + values)", m["llm_calls"]["total"]],
                  ["LLM calls of the greedy baseline", m["llm_calls"]["greedy_baseline"]],
                  ["LLM calls per question", m["llm_calls"]["per_question"]],
                  ["LLM calls per kept pair", m["llm_calls"]["per_kept_pair"]]]},
        llm_section(m),
        {"title": "Distributions (avg / min / med / max)", "headers": ["quantity", "avg", "min", "med", "max"],
         "rows": [row("MCTS iterations per question", m["mcts_iterations"]),
                  row("reasoning rounds of answer leaves", m["reasoning_rounds_of_answer_leaves"]),
                  row("response tokens per action", m["response_tokens"])]},
        {"title": "Pair types (Figure 2a: chosen-rejected action)", "headers": ["type", "pairs"],
         "rows": [[k, v] for k, v in sorted(m["pair_types"].items())]},
        {"title": "Reward gap of the pairs (Figure 2d)", "headers": ["|dQ| bin", "pairs"],
         "rows": [[k, v] for k, v in m["reward_gap_histogram"].items()]},
        {"title": "Best leaf of the tree vs the greedy reason_ground agent (F1)",
         "text": f"mean best-leaf F1 {m['best_leaf_vs_greedy']['mean_best_leaf_f1']}, "
                 f"mean greedy F1 {m['best_leaf_vs_greedy']['mean_greedy_f1']}",
         "headers": ["question", "answer leaves", "best leaf F1", "greedy answer", "greedy F1"],
         "rows": [[c["question_id"], c["answer_leaves"], c["best_leaf_f1"], c["greedy_answer"], c["greedy_f1"]]
                  for c in m["best_leaf_vs_greedy"]["per_question"]]},
    ]
    return secs


__all__ = ["run_statistics", "report_sections", "funnel_section", "llm_section", "summary", "histogram"]
