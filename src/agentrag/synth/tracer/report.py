"""Metrics and report of a Tracer build: funnel per stage with reasons, per-hop counts by type,
domain mix, LLM calls per verified item per hop count."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrag.synth.tracer.schema import Chain, DocRecord, Hop

if TYPE_CHECKING:
    from agentrag.synth.tracer.pipeline import TracerPipeline


def reason_key(reason: str | None) -> str:
    """A rejection reason reduced to its category (``parametric``, ``structural: leakage`` ...)."""
    if not reason:
        return "unknown"
    parts = [p.strip() for p in reason.split(":")]
    head = parts[0]
    if head in ("structural", "atomic", "link", "compose", "semantic") and len(parts) > 1:
        return f"{head}: {parts[1].split(' ')[0] if head != 'atomic' else parts[1]}"
    if len(parts) > 1 and parts[1].split(" ")[0] in ("parse_error", "llm_error", "judge"):
        return f"{head}: {parts[1]}"
    return head


def _failed_stage(hop: Hop) -> str:
    for c in hop.checks:
        if c.passed is False:
            return c.name
    return "unknown"


def build_metrics(p: TracerPipeline, docs: list[DocRecord], chains: list[Chain], exported: dict[str, Any],
                  elapsed: float, name: str) -> dict[str, Any]:
    annotated = [d for d in p.docs]
    atomic = p.atomic.read()
    pairs = [x for r in atomic for x in r.pairs]
    funnel: list[dict[str, Any]] = [
        {"stage": "sample: annotate candidates", "in": p.sampling_stats.get("candidates", len(annotated)),
         "out": sum(d.status == "ok" for d in annotated),
         "rejected": dict(Counter(reason_key(d.reason) for d in annotated if d.status != "ok"))},
        {"stage": "sample: select (max_per_type)", "in": sum(d.status == "ok" for d in annotated), "out": len(docs),
         "rejected": {}},
        {"stage": "atomic: generate", "in": len(atomic), "out": sum(r.status == "ok" for r in atomic),
         "rejected": dict(Counter(reason_key(r.reason) for r in atomic if r.status != "ok"))},
        {"stage": "atomic: filter pairs", "in": len(pairs), "out": sum(x.status == "accepted" for x in pairs),
         "rejected": dict(Counter(reason_key(x.reason) for x in pairs if x.status != "accepted"))},
    ]
    calls_by_level: dict[str, Any] = {}
    sample_calls = sum(d.provenance.usage.calls or 1 for d in annotated)
    base_calls = sample_calls + sum(r.calls for r in atomic)
    cumulative = base_calls
    for level, store in p.hops.items():
        recs = store.read()
        attempts = [a for r in recs for a in r.attempts]
        funnel.append({"stage": f"hop{level}: extend + verify", "in": len(recs),
                       "out": sum(r.status == "verified" for r in recs),
                       "rejected": dict(Counter("no related document" if not r.attempts else
                                                reason_key(r.attempts[-1].reason)
                                                for r in recs if r.status != "verified"))})
        funnel.append({"stage": f"hop{level}: candidate attempts", "in": len(attempts) + sum(
            r.status == "verified" for r in recs), "out": sum(r.status == "verified" for r in recs),
            "rejected": dict(Counter(_failed_stage(a) for a in attempts))})
        spent = sum(r.calls for r in recs)
        cumulative += spent
        verified = sum(r.status == "verified" for r in recs)
        tried = len(attempts) + verified
        calls_by_level[str(level)] = {
            "calls": spent, "chains": len(recs), "candidates_tried": tried, "verified": verified,
            "calls_per_candidate": round(spent / tried, 1) if tried else None,
            "calls_per_verified_this_level": round(spent / verified, 1) if verified else None,
            "calls_per_verified_cumulative": round(cumulative / verified, 1) if verified else None}
    by_hops_type = Counter((c.depth, c.template) for c in chains if c.depth >= 2)
    per_hop: dict[str, Counter[str]] = {}
    for c in chains:
        for level in range(2, c.depth + 1):
            per_hop.setdefault(f"{level}hop", Counter())[c.template] += 1
    return {
        "name": name, "elapsed": round(elapsed, 1), "sampling": p.sampling_stats, "funnel": funnel,
        "per_hop_by_type": {k: dict(v) for k, v in per_hop.items()},
        "chains_by_max_depth": {f"{d}hop/{t}": n for (d, t), n in sorted(by_hops_type.items())},
        "domain_mix_docs": dict(Counter(d.domain for d in docs)),
        "domain_mix_benchmark": dict(Counter(c.doc_domain for c in chains if c.depth >= 2)),
        "llm_calls": {"sample": sample_calls, "atomic": sum(r.calls for r in atomic), "by_level": calls_by_level},
        "export": exported,
    }


def report_sections(m: dict[str, Any]) -> list[dict[str, Any]]:
    funnel_rows = [[r["stage"], r["in"], r["out"], ", ".join(f"{k}: {v}" for k, v in r["rejected"].items())]
                   for r in m["funnel"]]
    hop_rows = [[h, t, n] for h, by in sorted(m["per_hop_by_type"].items()) for t, n in sorted(by.items())]
    call_rows = [[lv, v["calls"], v["candidates_tried"], v["calls_per_candidate"], v["verified"],
                  v["calls_per_verified_this_level"], v["calls_per_verified_cumulative"]]
                 for lv, v in m["llm_calls"]["by_level"].items()]
    dom = m["domain_mix_docs"]
    return [
        {"title": "Funnel", "text": f"Built in {m['elapsed']} s. Sampling: {m['sampling']}.",
         "headers": ["stage", "in", "out", "rejected (reason: count)"], "rows": funnel_rows},
        {"title": "Verified items per hop count and type", "headers": ["hops", "type", "items"], "rows": hop_rows},
        {"title": "LLM calls (generator + judge)", "text": f"sampling {m['llm_calls']['sample']}, atomic QA "
         f"{m['llm_calls']['atomic']}", "headers": ["level", "calls", "candidates tried", "calls / candidate",
                                                   "verified", "calls / verified (level)",
                                                   "calls / verified (cumulative)"], "rows": call_rows},
        {"title": "Domain mix (sampled documents)", "headers": ["domain", "docs"],
         "rows": [[k, v] for k, v in sorted(dom.items())]},
        {"title": "Exports", "text": str(m["export"])},
    ]


def write_tracer_report(run_dir: Path, metrics: dict[str, Any]) -> None:
    from agentrag.render import write_report

    write_report(run_dir, f"AgenticRAGTracer build {metrics['name']}", report_sections(metrics))


__all__ = ["build_metrics", "report_sections", "write_tracer_report", "reason_key"]
