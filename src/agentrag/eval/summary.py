"""Streaming aggregation of evaluation results: ``metrics.json``'s statistics in one pass.

:class:`Summary` takes results one by one (``add``) and keeps counters and running sums, never
the results: :func:`agentrag.eval.runner.summarize` and :func:`agentrag.eval.hops.diagnose` feed
it from a list or straight from ``results.jsonl``. Its memory is a few counters per hop count and
per Table 2 subset, plus, for Tracer's MaxD, one small entry per 3/4-hop question (its hops,
subset and verdict) and one per question with lower-hop probes (the highest level answered
correctly): nothing per result otherwise, and no trajectory.

The numbers are those of the list-based code it replaced, to the byte: each mean is
``round(sum(xs) / len(xs), 4)`` over the same values in the same order, and :class:`Mean` adds
them the way CPython's ``sum`` does (plain addition before 3.12, Neumaier-compensated from 3.12).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from typing import Any

from agentrag.eval.result import EvalResult

_COMPENSATED = sys.version_info >= (3, 12)  # sum() of floats is Neumaier-compensated from 3.12
#: Tracer measures MaxD (and Table 2's steps) on the 3- and 4-hop questions only
MAXD_MIN_HOPS = 3
TYPES = ("comparison", "inference")


class Mean:
    """A running mean: :meth:`value` is ``round(sum(xs) / len(xs), 4)`` (``None`` when empty) for
    the values added, in the order added, to the bit."""

    __slots__ = ("n", "_s", "_c")

    def __init__(self) -> None:
        self.n = 0
        self._s = 0.0
        self._c = 0.0

    def add(self, x: float) -> None:
        s = self._s
        t = s + x
        if _COMPENSATED:
            self._c += ((s - t) + x) if abs(s) >= abs(x) else ((x - t) + s)
        self._s = t
        self.n += 1

    def value(self) -> float | None:
        if not self.n:
            return None
        c = self._c
        total = self._s + c if c and math.isfinite(c) else self._s
        return round(total / self.n, 4)


def subset_name(result: EvalResult) -> str:
    """Table 2's subset of a result: ``comparison-3hop`` when the data says the type, else ``3hop``."""
    qtype = str(result.metadata.get("type", "")).lower()
    return f"{qtype}-{result.hops}hop" if qtype in TYPES else f"{result.hops}hop"


class _Group:
    """Steps, top-k and depth of one group of judged main questions (a hop count, a subset, all)."""

    def __init__(self) -> None:
        self.n = 0
        self.accuracy, self.em, self.f1, self.steps = Mean(), Mean(), Mean(), Mean()
        self.steps_c, self.steps_i, self.topk_c, self.topk_i = Mean(), Mean(), Mean(), Mean()
        self.collapse, self.over = Mean(), Mean()
        self.maxd = Mean()

    def add(self, r: EvalResult) -> None:
        self.n += 1
        self.accuracy.add(float(bool(r.correct)))
        self.em.add(r.em)
        self.f1.add(r.f1)
        self.steps.add(float(r.steps))
        (self.steps_c if r.correct else self.steps_i).add(float(r.steps))
        topk = self.topk_c if r.correct else self.topk_i
        for k in r.topk_per_step:
            topk.add(float(k))
        self.collapse.add(1.0 if r.steps < (r.hops or 0) else 0.0)
        self.over.add(1.0 if r.steps > (r.hops or 0) else 0.0)


class HopDiagnosis:
    """The hop-aware diagnosis (:func:`agentrag.eval.hops.diagnose`), streamed."""

    def __init__(self) -> None:
        self.everything = 0
        self.all = _Group()  # every judged main question (accuracy, Steps-C/I, top-k)
        self.with_hops = _Group()  # ... whose hop count is known (collapse, over-extension, MaxD)
        self.wrong_with_hops = _Group()
        self.by_hops: dict[int, _Group] = {}
        self.subsets: dict[str, _Group] = {}
        self.histogram: Counter[int] = Counter()
        self.deep: list[tuple[str, int, str, bool]] = []  # (id, hops, subset, correct) of 3/4-hop questions
        self.probed: dict[str, int] = {}  # parent id -> highest lower-hop level answered correctly (0: none)

    def add(self, r: EvalResult) -> None:
        if r.parent_id is not None:  # a lower-hop probe (MaxD)
            best = self.probed.get(r.parent_id, 0)
            self.probed[r.parent_id] = max(best, (r.level or 0) if r.correct else 0)
            return
        self.everything += 1
        if r.correct is None:  # the judge gave no verdict: left out, counted as unjudged
            return
        self.all.add(r)
        self.histogram[r.steps] += 1
        if r.hops is None:
            return
        self.with_hops.add(r)
        if not r.correct:
            self.wrong_with_hops.add(r)
        self.by_hops.setdefault(r.hops, _Group()).add(r)
        if r.hops >= MAXD_MIN_HOPS:
            name = subset_name(r)
            self.subsets.setdefault(name, _Group()).add(r)
            self.deep.append((r.id, r.hops, name, bool(r.correct)))

    def result(self) -> dict[str, Any]:
        for rid, hops, name, correct in self.deep:  # depths are whole numbers: any order sums alike
            if rid in self.probed:
                depth = float(hops if correct else self.probed[rid])
                for g in (self.by_hops[hops], self.subsets[name], self.with_hops):
                    g.maxd.add(depth)
        hop_table = {str(h): {
            "n": g.n, "accuracy": g.accuracy.value(), "em": g.em.value(), "f1": g.f1.value(),
            "mean_steps": g.steps.value(), "steps_c": g.steps_c.value(), "steps_i": g.steps_i.value(),
            "collapse_rate": g.collapse.value(), "over_extension_rate": g.over.value(),
            "topk_c": g.topk_c.value(), "topk_i": g.topk_i.value(), "maxd": g.maxd.value(), "maxd_n": g.maxd.n}
            for h, g in sorted(self.by_hops.items())}
        table2 = {name: {"n": g.n, "maxd": g.maxd.value(), "maxd_n": g.maxd.n, "steps_c": g.steps_c.value(),
                         "steps_i": g.steps_i.value()} for name, g in sorted(self.subsets.items())}
        a = self.all
        return {
            "n": a.n,
            "unjudged": self.everything - a.n,
            "accuracy": a.accuracy.value(),
            "steps_c": a.steps_c.value(),
            "steps_i": a.steps_i.value(),
            "collapse_rate": self.with_hops.collapse.value(),
            "over_extension_rate": self.with_hops.over.value(),
            "collapse_rate_incorrect": self.wrong_with_hops.collapse.value(),
            "over_extension_rate_incorrect": self.wrong_with_hops.over.value(),
            "topk_c": a.topk_c.value(),
            "topk_i": a.topk_i.value(),
            "maxd": self.with_hops.maxd.value(),
            "table2": table2,
            "by_hops": hop_table,
            "step_histogram": ({str(k): self.histogram[k] for k in range(min(self.histogram), max(self.histogram) + 1)}
                               if self.histogram else {}),
        }


class Summary:
    """The statistics of ``metrics.json`` (:func:`agentrag.eval.runner.summarize`), streamed:
    :meth:`add` each result (main questions and lower-hop probes, in file order), then :meth:`result`."""

    def __init__(self) -> None:
        self.n = 0
        self.em, self.f1, self.acc, self.recall, self.steps = Mean(), Mean(), Mean(), Mean(), Mean()
        self.judge_mean, self.judge_pass, self.topk, self.elapsed = Mean(), Mean(), Mean(), Mean()
        self.judge_errors = self.context_limit = self.prompt_tokens = self.completion_tokens = 0
        #: turns that called a tool the agent does not have: malformed model output (fed back to the
        #: model and counted toward max_format_errors), never an outage
        self.unknown_tool_calls = 0
        self.finish_reasons: Counter[str] = Counter()
        self.hops = HopDiagnosis()

    def add(self, r: EvalResult) -> None:
        self.hops.add(r)
        if r.parent_id is not None:
            return
        self.n += 1
        self.em.add(r.em)
        self.f1.add(r.f1)
        self.acc.add(r.acc)
        if r.judge is not None:
            self.judge_mean.add(float(r.judge))
            self.judge_pass.add(float(r.judge >= 1))
        self.judge_errors += bool(r.judge_error)
        self.context_limit += r.finish_reason == "context_limit"
        if r.recall is not None:
            self.recall.add(r.recall)
        self.steps.add(float(r.steps))
        for k in r.topk_per_step:
            self.topk.add(float(k))
        self.finish_reasons[r.finish_reason] += 1
        if r.trajectory:
            self.prompt_tokens += r.trajectory.usage.prompt_tokens
            self.completion_tokens += r.trajectory.usage.completion_tokens
            self.elapsed.add(r.trajectory.elapsed)
            self.unknown_tool_calls += sum(1 for s in r.trajectory.steps
                                           if s.error is not None and s.error.startswith("unknown tool"))

    def result(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "em": self.em.value(),
            "f1": self.f1.value(),
            "acc": self.acc.value(),
            "judge_mean": self.judge_mean.value(),
            "judge_pass": self.judge_pass.value(),
            "judge_errors": self.judge_errors,
            "context_limit": self.context_limit,
            "unknown_tool_calls": self.unknown_tool_calls,
            "recall": self.recall.value(),
            "mean_steps": self.steps.value(),
            "mean_topk": self.topk.value(),
            "finish_reasons": dict(self.finish_reasons),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "mean_elapsed_s": self.elapsed.value(),
            "hops": self.hops.result(),
        }


__all__ = ["Summary", "HopDiagnosis", "Mean", "subset_name", "MAXD_MIN_HOPS", "TYPES"]
