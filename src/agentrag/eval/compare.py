"""Before/after comparison of two eval runs on the same questions (the loop's table, docs/loop.md).

``python -m agentrag.eval.compare BASE_RUN TRAINED_RUN [--out FILE.md]`` reads both runs'
``results.jsonl``, pairs the questions both scored, and prints EM, F1, gold-passage recall, the
finish-reason rates, the protocol-error rates and the mean steps of each, with paired bootstrap
95% confidence intervals on the F1 and EM differences (trained - base), overall and per dataset
(the ``source`` the dataset loader records: ``2wiki``, ``musique``, ``hotpotqa``).

A side may be several runs joined by commas (``base_2wiki,base_musique,base_hotpotqa``): the
held-out protocol of docs/loop.md evaluates each dataset in its own run; their questions are pooled
(an id in two runs of one side is an error). A comparison on fewer than ``--min-n`` paired
questions (default 100, the protocol's size) says so under the table.

Protocol errors: a trajectory *has a protocol error* when some turn was malformed (a step with an
error and neither a tool call nor retrieved documents: unparseable output, a broken tool call,
no answer tags) or it ended with ``parse_error``/``max_steps``/``no_answer``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.eval.result import EvalResult
from agentrag.records import read_jsonl

BAD_FINISH = ("parse_error", "max_steps", "no_answer", "context_limit")


PROTOCOL_N = 100


def load_results(run: str | Path) -> dict[str, EvalResult]:
    """The results of one run directory, or of several joined by commas (pooled by question id)."""
    out: dict[str, EvalResult] = {}
    for part in str(run).split(","):
        path = Path(part) / "results.jsonl"
        if not path.is_file():
            raise UserError(f"{path}: no results; run `agentrag eval --out {part}` first")
        mine = {r.id: r for r in read_jsonl(path, EvalResult)}  # a resumed run's last record wins
        both = sorted(set(mine) & set(out))
        if both:
            raise UserError(f"{path}: question id {both[0]!r} is also in another run of {str(run)!r}; "
                            "join runs of different questions only")
        out.update(mine)
    return out


def dataset_of(r: EvalResult) -> str:
    """The dataset a result comes from (the loader's ``source``), ``unknown`` without one."""
    return str(r.metadata.get("source") or "unknown")


def malformed_turns(r: EvalResult) -> int:
    """Turns whose output the agent could not use (errors without a tool call or documents)."""
    if r.trajectory is None:
        return 0
    return sum(1 for s in r.trajectory.steps if s.error and s.action is None and not s.hits)


def has_protocol_error(r: EvalResult) -> bool:
    return malformed_turns(r) > 0 or r.finish_reason in BAD_FINISH


def summary(rs: Sequence[EvalResult]) -> dict[str, Any]:
    n = len(rs)

    def mean(xs: Sequence[float]) -> float:
        return round(sum(xs) / len(xs), 4) if xs else 0.0

    finish = Counter(r.finish_reason for r in rs)
    return {"n": n, "em": mean([r.em for r in rs]), "f1": mean([r.f1 for r in rs]),
            "recall": mean([r.recall for r in rs if r.recall is not None]),
            "protocol_error_rate": mean([float(has_protocol_error(r)) for r in rs]),
            "malformed_turns_per_q": mean([float(malformed_turns(r)) for r in rs]),
            "parse_error_rate": mean([float(r.finish_reason == "parse_error") for r in rs]),
            "answered_rate": mean([float(r.finish_reason == "answered") for r in rs]),
            "finish_reasons": {k: round(v / n, 4) for k, v in sorted(finish.items())} if n else {},
            "steps": mean([float(r.steps) for r in rs])}


def bootstrap_diff(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``b - a`` over paired items and its percentile bootstrap interval."""
    if len(a) != len(b) or not a:
        raise ValueError("bootstrap_diff needs two non-empty paired lists")
    d = [y - x for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(d) for _ in d) / len(d) for _ in range(resamples))
    lo = means[int((1 - level) / 2 * resamples)]
    hi = means[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return round(sum(d) / len(d), 4), round(lo, 4), round(hi, 4)


def _diff(b: Sequence[EvalResult], t: Sequence[EvalResult], metric: str, resamples: int, seed: int) -> dict[str, Any]:
    diff, lo, hi = bootstrap_diff([getattr(r, metric) for r in b], [getattr(r, metric) for r in t],
                                  resamples=resamples, seed=seed)
    return {"mean": diff, "ci95": [lo, hi], "excludes_0": lo > 0 or hi < 0, "resamples": resamples}


def compare(base_run: str | Path, trained_run: str | Path, *, resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Both sides' summaries and paired bootstrap intervals, overall and per dataset."""
    base, trained = load_results(base_run), load_results(trained_run)
    ids = sorted(set(base) & set(trained))
    if not ids:
        raise UserError(f"{base_run} and {trained_run} share no scored question")
    b, t = [base[i] for i in ids], [trained[i] for i in ids]
    per: dict[str, Any] = {}
    for name in sorted({dataset_of(r) for r in b}):
        keep = [k for k, r in enumerate(b) if dataset_of(r) == name]
        bd, td = [b[k] for k in keep], [t[k] for k in keep]
        per[name] = {"n": len(keep), "base": summary(bd), "trained": summary(td),
                     "f1_diff": _diff(bd, td, "f1", resamples, seed), "em_diff": _diff(bd, td, "em", resamples, seed)}
    return {"base": summary(b), "trained": summary(t), "n_paired": len(ids),
            "f1_diff": _diff(b, t, "f1", resamples, seed), "em_diff": _diff(b, t, "em", resamples, seed),
            "per_dataset": per}


ROWS = (("EM", "em"), ("F1", "f1"), ("gold-passage recall", "recall"), ("answered", "answered_rate"),
        ("protocol-error rate", "protocol_error_rate"), ("malformed turns / question", "malformed_turns_per_q"),
        ("parse_error finish", "parse_error_rate"), ("steps (retrievals)", "steps"))


def _ci(f: dict[str, Any]) -> str:
    return f"{f['mean']:+.4f} [{f['ci95'][0]:+.4f}, {f['ci95'][1]:+.4f}]"


def to_markdown(res: dict[str, Any], base_name: str = "base", trained_name: str = "trained",
                min_n: int = PROTOCOL_N) -> str:
    b, t = res["base"], res["trained"]
    lines = [f"| metric (n={res['n_paired']}) | {base_name} | {trained_name} |", "|---|---|---|"]
    lines += [f"| {label} | {b[key]} | {t[key]} |" for label, key in ROWS]
    reasons = sorted(set(b["finish_reasons"]) | set(t["finish_reasons"]))
    lines += [f"| finish {k} | {b['finish_reasons'].get(k, 0)} | {t['finish_reasons'].get(k, 0)} |" for k in reasons]
    f = res["f1_diff"]
    lines.append("")
    lines.append(f"F1 difference (trained - base): {f['mean']:+.4f}, 95% paired bootstrap CI "
                 f"[{f['ci95'][0]:+.4f}, {f['ci95'][1]:+.4f}] ({f['resamples']} resamples); "
                 f"{'excludes' if f['excludes_0'] else 'includes'} 0.")
    if "em_diff" in res:
        e = res["em_diff"]
        lines.append(f"EM difference (trained - base): {_ci(e)}; {'excludes' if e['excludes_0'] else 'includes'} 0.")
    per = res.get("per_dataset") or {}
    if per:
        lines += ["", f"| dataset | n | F1 {base_name} | F1 {trained_name} | F1 diff [95% CI] | EM {base_name} | "
                  f"EM {trained_name} | EM diff [95% CI] |", "|---|---|---|---|---|---|---|---|"]
        for name, d in per.items():
            lines.append(f"| {name} | {d['n']} | {d['base']['f1']} | {d['trained']['f1']} | {_ci(d['f1_diff'])} | "
                         f"{d['base']['em']} | {d['trained']['em']} | {_ci(d['em_diff'])} |")
    if res["n_paired"] < min_n:
        lines += ["", f"Note: {res['n_paired']} paired questions, fewer than the held-out protocol's {min_n} "
                  "(docs/loop.md): a small-sample comparison."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agentrag.eval.compare", description=__doc__.splitlines()[0])
    ap.add_argument("base", help="the base run directory (or several, joined by commas)")
    ap.add_argument("trained", help="the trained run directory (or several, joined by commas)")
    ap.add_argument("--out", help="write the markdown table here (and FILE.json beside it)")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--min-n", type=int, default=PROTOCOL_N,
                    help="paired questions the protocol asks for; fewer are flagged under the table")
    args = ap.parse_args(argv)
    try:
        res = compare(args.base, args.trained, resamples=args.resamples)
    except UserError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    md = to_markdown(res, min_n=args.min_n)
    sys.stdout.write(md)
    if args.out:
        Path(args.out).write_text(md, encoding="utf-8")
        Path(args.out).with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
