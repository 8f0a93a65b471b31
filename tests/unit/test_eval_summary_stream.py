"""The streamed statistics of ``eval`` (``eval.summary``) against the list-based code they
replaced (kept below as the reference, verbatim but for the names): ``metrics.json`` must be the
same to the byte, on synthetic results of every kind and on a real run's ``results.jsonl``."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from test_eval_outages import PASSAGES, plan_step_policy

from agentrag.eval.hops import MAXD_MIN_HOPS
from agentrag.eval.judge import LLMJudge
from agentrag.eval.result import EvalResult
from agentrag.eval.run import run_eval
from agentrag.eval.runner import EvalConfig, outage_kind, summarize
from agentrag.eval.summary import TYPES, Mean
from agentrag.records import Trajectory, Usage
from agentrag.runs import RunDir
from agentrag.testing import FakeRetriever, ScriptedLLM

# ----------------------------------------------------------------- the list-based reference


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _topk(rs: Sequence[EvalResult]) -> float | None:
    return _mean([float(k) for r in rs for k in r.topk_per_step])


def subset_name(result: EvalResult) -> str:
    """Table 2's subset of a result: ``comparison-3hop`` when the data says the type, else ``3hop``."""
    qtype = str(result.metadata.get("type", "")).lower()
    return f"{qtype}-{result.hops}hop" if qtype in TYPES else f"{result.hops}hop"


def list_diagnose(results: Sequence[EvalResult]) -> dict[str, Any]:
    """Hop-aware diagnosis of evaluated results (see the module docstring for the definitions)."""
    everything = [r for r in results if r.parent_id is None]
    main = [r for r in everything if r.correct is not None]
    probes: dict[str, list[EvalResult]] = defaultdict(list)
    for r in results:
        if r.parent_id is not None:
            probes[r.parent_id].append(r)

    by_hops: dict[int, list[EvalResult]] = defaultdict(list)
    for r in main:
        if r.hops is not None:
            by_hops[r.hops].append(r)

    correct = [r for r in main if r.correct]
    incorrect = [r for r in main if not r.correct]
    with_hops = [r for r in main if r.hops is not None]
    wrong_with_hops = [r for r in incorrect if r.hops is not None]

    def rate(rs: Sequence[EvalResult], cond: Any) -> float | None:
        return _mean([1.0 if cond(r) else 0.0 for r in rs])

    def depths(rs: Sequence[EvalResult]) -> list[float]:
        return [float(_depth(r, probes[r.id])) for r in rs
                if (r.hops or 0) >= MAXD_MIN_HOPS and probes.get(r.id)]

    hop_table: dict[str, dict[str, Any]] = {}
    for h in sorted(by_hops):
        rs = by_hops[h]
        ds = depths(rs)
        hop_table[str(h)] = {
            "n": len(rs),
            "accuracy": _mean([float(bool(r.correct)) for r in rs]),
            "em": _mean([r.em for r in rs]),
            "f1": _mean([r.f1 for r in rs]),
            "mean_steps": _mean([float(r.steps) for r in rs]),
            "steps_c": _mean([float(r.steps) for r in rs if r.correct]),
            "steps_i": _mean([float(r.steps) for r in rs if not r.correct]),
            "collapse_rate": rate(rs, lambda r: r.steps < (r.hops or 0)),
            "over_extension_rate": rate(rs, lambda r: r.steps > (r.hops or 0)),
            "topk_c": _topk([r for r in rs if r.correct]),
            "topk_i": _topk([r for r in rs if not r.correct]),
            "maxd": _mean(ds),
            "maxd_n": len(ds),
        }
    subsets: dict[str, list[EvalResult]] = defaultdict(list)
    for r in with_hops:
        if (r.hops or 0) >= MAXD_MIN_HOPS:
            subsets[subset_name(r)].append(r)
    table2 = {name: {"n": len(rs), "maxd": _mean(depths(rs)), "maxd_n": len(depths(rs)),
                     "steps_c": _mean([float(r.steps) for r in rs if r.correct]),
                     "steps_i": _mean([float(r.steps) for r in rs if not r.correct])}
              for name, rs in sorted(subsets.items())}
    return {
        "n": len(main),
        "unjudged": len(everything) - len(main),
        "accuracy": _mean([float(bool(r.correct)) for r in main]),
        "steps_c": _mean([float(r.steps) for r in correct]),
        "steps_i": _mean([float(r.steps) for r in incorrect]),
        "collapse_rate": rate(with_hops, lambda r: r.steps < (r.hops or 0)),
        "over_extension_rate": rate(with_hops, lambda r: r.steps > (r.hops or 0)),
        "collapse_rate_incorrect": rate(wrong_with_hops, lambda r: r.steps < (r.hops or 0)),
        "over_extension_rate_incorrect": rate(wrong_with_hops, lambda r: r.steps > (r.hops or 0)),
        "topk_c": _topk(correct),
        "topk_i": _topk(incorrect),
        "maxd": _mean(depths(with_hops)),
        "table2": table2,
        "by_hops": hop_table,
        "step_histogram": _histogram([r.steps for r in main]),
    }


def _depth(result: EvalResult, lower: Sequence[EvalResult]) -> int:
    if result.correct:
        return result.hops or 0
    return max((r.level or 0 for r in lower if r.correct), default=0)


def _histogram(values: Sequence[int]) -> dict[str, int]:
    """Counts per value over the whole range min..max (empty bins included, so gaps show)."""
    counts: dict[int, int] = defaultdict(int)
    for v in values:
        counts[v] += 1
    if not counts:
        return {}
    return {str(k): counts[k] for k in range(min(counts), max(counts) + 1)}


def list_summarize(results: Sequence[EvalResult], *, n_requested: int | None = None,
              unfinished: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Aggregate metrics (fractions in [0, 1]) and the hop-aware diagnosis; ``unfinished`` (id ->
    reason, from ``unfinished.json``) is reported as a count and a count per error kind."""
    main = [r for r in results if r.parent_id is None]

    def mean(xs: Sequence[float]) -> float | None:
        return round(sum(xs) / len(xs), 4) if xs else None

    judged = [r.judge for r in main if r.judge is not None]
    recalls = [r.recall for r in main if r.recall is not None]
    out: dict[str, Any] = {
        "n": len(main),
        "em": mean([r.em for r in main]),
        "f1": mean([r.f1 for r in main]),
        "acc": mean([r.acc for r in main]),
        "judge_mean": mean([float(j) for j in judged]),
        "judge_pass": mean([float(j >= 1) for j in judged]),
        "judge_errors": sum(1 for r in main if r.judge_error),
        "context_limit": sum(1 for r in main if r.finish_reason == "context_limit"),
        "unknown_tool_calls": sum(1 for r in main if r.trajectory for s in r.trajectory.steps
                                  if (s.error or "").startswith("unknown tool")),
        "recall": mean(recalls),
        "mean_steps": mean([float(r.steps) for r in main]),
        "mean_topk": mean([float(k) for r in main for k in r.topk_per_step]),
        "finish_reasons": dict(Counter(r.finish_reason for r in main)),
        "prompt_tokens": sum(r.trajectory.usage.prompt_tokens for r in main if r.trajectory),
        "completion_tokens": sum(r.trajectory.usage.completion_tokens for r in main if r.trajectory),
        "mean_elapsed_s": mean([r.trajectory.elapsed for r in main if r.trajectory]),
        "hops": list_diagnose(results),
    }
    if n_requested is not None:
        out["missing"] = max(0, n_requested - len(main))
    if unfinished is not None:
        out["unfinished"] = len(unfinished)
        out["unfinished_reasons"] = dict(Counter(outage_kind(v) for v in unfinished.values()))
    return out


# ----------------------------------------------------------------- tests


def synthetic(n: int, seed: int) -> list[EvalResult]:
    """Main questions of 1-4 hops (typed or not, judged, unjudged, no hops) and lower-hop probes."""
    rnd = random.Random(seed)
    out: list[EvalResult] = []
    for i in range(n):
        hops = rnd.choice([None, 1, 2, 3, 4, 4])
        correct = rnd.choice([True, False, None]) if rnd.random() < 0.2 else rnd.random() < 0.5
        traj = None if rnd.random() < 0.1 else Trajectory(
            id=f"q{i}", question="q", elapsed=rnd.random() * 3, usage=Usage(prompt_tokens=rnd.randrange(900),
                                                                 completion_tokens=rnd.randrange(90)))
        out.append(EvalResult(
            id=f"q{i}", question="q", golden_answers=["a"], hops=hops, em=float(rnd.random() < 0.4),
            f1=rnd.choice([0.0, 1.0, rnd.random(), 2 / 3, 0.1]), acc=float(rnd.random() < 0.5),
            judge=rnd.choice([None, 0, 1, 2]), judge_error=rnd.choice([None, None, "not a verdict"]),
            recall=rnd.choice([None, 0.5, 1.0, 1 / 3, rnd.random()]), correct=correct,
            steps=rnd.randrange(7), topk_per_step=[rnd.choice([1, 3, 5]) for _ in range(rnd.randrange(4))],
            finish_reason=rnd.choice(["answered", "answered", "max_steps", "context_limit"]),
            metadata={"type": rnd.choice(["comparison", "inference", "bridge"])} if rnd.random() < 0.5 else {},
            trajectory=traj))
        if (hops or 0) >= 3 and rnd.random() < 0.7:
            for level in range(1, hops):
                out.insert(rnd.randrange(len(out) + 1), EvalResult(
                    id=f"q{i}#L{level}", question="p", golden_answers=["b"], hops=level, parent_id=f"q{i}",
                    level=level, correct=rnd.choice([True, False, None]), steps=rnd.randrange(4)))
    return out


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, default=str)


def test_streamed_statistics_are_the_list_based_ones_to_the_byte():
    for seed in range(12):
        results = synthetic(300, seed)
        unfinished = {"x": "LLMError: timeout", "y": "RetrievalError: down"}
        want = list_summarize(results, n_requested=320, unfinished=unfinished)
        assert dump(summarize(iter(results), n_requested=320, unfinished=unfinished)) == dump(want)
    assert dump(summarize([])) == dump(list_summarize([]))
    assert dump(summarize(synthetic(1, 0))) == dump(list_summarize(synthetic(1, 0)))


def test_mean_adds_as_the_builtin_sum_does():
    for xs in ([1e16, 1.0, -1e16], [0.1] * 10, [2 / 3, 1 / 3, 0.1, 1e-9, 5.0], [0.0], [-0.0]):
        m = Mean()
        for x in xs:
            m.add(x)
        assert m.value() == round(sum(xs) / len(xs), 4) and m.n == len(xs)
    assert Mean().value() is None


def test_metrics_json_of_a_run_is_the_list_based_computation_over_its_results(tmp_path):
    data = tmp_path / "qa.jsonl"
    rows = [{"id": f"q{i}", "question": f"What is the capital of country {i}?", "golden_answers": [f"City {i}"],
             "metadata": {"hops": 1 + i % 4}} for i in range(24)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    run_eval(EvalConfig(dataset=str(data), agent="plan_step", concurrency=3), out,
             llm=ScriptedLLM(default=plan_step_policy), retriever=FakeRetriever(PASSAGES),
             judge=LLMJudge(ScriptedLLM(default='{"reason": "same", "score": 1}')))
    written = json.loads((out / "metrics.json").read_text())
    with RunDir(out) as run:
        results = run.stage_file("results", EvalResult).read()
    want = list_summarize(results, n_requested=24, unfinished={})
    assert want["n"] == 24 and want["hops"]["by_hops"]
    assert dump({k: written[k] for k in want}) == dump(want)
