"""Statistics and report of a Tracer build, from its stage records: funnel counts per declared
stage with reasons, per-hop counts by type, domain mix, LLM calls per verified item per hop count.

:func:`tracer_counts` gives the driver the funnel (per declared stage: in, out, rejected by
reason) and the Tracer's own statistics (``metrics.json`` top level); :func:`report_sections`
turns ``metrics.json`` (with the driver's ``llm`` usage block) into the report's sections. This
module reads records only: it imports nothing of the pipeline.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from agentrag.synth.tracer.schema import AtomicRecord, Chain, Check, DocRecord, HopRecord

Counts = dict[str, tuple[int, int, dict[str, int]]]


class ChainLike(Protocol):
    """What the statistics read of a chain."""

    @property
    def depth(self) -> int: ...
    @property
    def template(self) -> str: ...
    @property
    def doc_domain(self) -> str: ...


class ChainShape(NamedTuple):
    """A chain reduced to what the statistics read (about 100 bytes; its strings are shared)."""

    depth: int
    template: str
    doc_domain: str

    @classmethod
    def of(cls, chain: ChainLike) -> ChainShape:
        return cls(chain.depth, chain.template, chain.doc_domain)

    @classmethod
    def noting(cls, chains: Iterable[Chain], into: list[ChainShape]) -> Iterator[Chain]:
        """``chains`` passed through, the shape of each appended to ``into``."""
        for c in chains:
            into.append(cls.of(c))
            yield c


def reason_key(reason: str | None) -> str:
    """A rejection reason reduced to its category (``parametric``, ``structural: leakage`` ...)."""
    if not reason:
        return "unknown"
    parts = [p.strip() for p in reason.split(":")]
    head = parts[0]
    if head == "verifier" and len(parts) > 1:
        return f"verifier: {parts[1]}"
    if head == "structural" and len(parts) > 2 and parts[1] == "verifier":
        return f"structural: verifier: {parts[2]}"
    if head in ("structural", "atomic", "link", "compose", "semantic") and len(parts) > 1:
        return f"{head}: {parts[1].split(' ')[0] if head != 'atomic' else parts[1]}"
    if len(parts) > 1 and parts[1].split(" ")[0] in ("parse_error", "context_limit", "judge"):
        return f"{head}: {parts[1]}"
    return head


class _Notes:
    """What the checks of the stage records note beyond their verdicts: the verifier's decisions
    per check, the no-answer aliases removed, and the documents shown cut."""

    def __init__(self) -> None:
        self.verifier: dict[str, Counter[str]] = {}
        self.aliases_removed = 0
        self.cuts: Counter[str] = Counter()

    def checks(self, checks: Iterable[Check]) -> None:
        for c in checks:
            self.aliases_removed += len(c.details.get("no_answer_aliases_removed") or [])
            for name in c.details.get("verifier") or []:
                rejected = c.passed is False and f"verifier: {name}:" in c.reason
                self.verifier.setdefault(name, Counter())["rejected" if rejected else "kept"] += 1

    def as_dict(self) -> dict[str, Any]:
        return {"verifier_decisions": {k: dict(v) for k, v in sorted(self.verifier.items())},
                "no_answer_aliases_removed": self.aliases_removed, "doc_cuts": dict(self.cuts)}


def tracer_counts(annotated: Iterable[DocRecord], selected: Sequence[DocRecord], atomic: Iterable[AtomicRecord],
                  hops: Mapping[int, Iterable[HopRecord]], chains: Iterable[ChainLike], exported: Mapping[str, Any],
                  sampling: Mapping[str, int]) -> tuple[Counts, dict[str, Any]]:
    """The funnel counts of the declared stages and the Tracer's own statistics (module docstring).
    ``annotated``, ``atomic`` and each level of ``hops`` are read once, record by record (a run's
    :class:`~agentrag.runs.JsonlStore` streams its file): memory holds counters, not the records;
    ``selected`` is the pipeline's own state, ``chains`` is read once (chains or their
    :class:`ChainShape`)."""
    n_docs = ok_docs = sample_calls = 0
    doc_rejected: Counter[str] = Counter()
    for d in annotated:
        n_docs += 1
        sample_calls += d.provenance.usage.calls or 1
        if d.status == "ok":
            ok_docs += 1
        else:
            doc_rejected[reason_key(d.reason)] += 1
    n_atomic = ok_atomic = atomic_calls = n_pairs = ok_pairs = 0
    atomic_rejected: Counter[str] = Counter()
    pair_rejected: Counter[str] = Counter()
    notes = _Notes()
    for r in atomic:
        n_atomic += 1
        atomic_calls += r.calls
        notes.cuts["atomic"] += r.cuts
        if r.status == "ok":
            ok_atomic += 1
        else:
            atomic_rejected[reason_key(r.reason)] += 1
        for x in r.pairs:
            n_pairs += 1
            notes.checks(x.checks)
            if x.status == "accepted":
                ok_pairs += 1
            else:
                pair_rejected[reason_key(x.reason)] += 1
    counts: Counts = {
        "sample": (sampling.get("candidates", n_docs), ok_docs, dict(doc_rejected)),
        "select": (ok_docs, len(selected), {}),
        "atomic": (n_atomic, ok_atomic, dict(atomic_rejected)),
        "pairs": (n_pairs, ok_pairs, dict(pair_rejected)),
    }
    cumulative = sample_calls + atomic_calls
    calls_by_level: dict[str, Any] = {}
    for level, recs in hops.items():
        n_recs = verified = spent = n_attempts = 0
        hop_rejected: Counter[str] = Counter()
        candidate_rejected: Counter[str] = Counter()
        for h in recs:
            n_recs += 1
            spent += h.calls
            n_attempts += len(h.attempts)
            notes.cuts[f"hop{level}"] += h.cuts
            for a in [*h.attempts, *([h.hop] if h.hop is not None else [])]:
                notes.checks(a.checks)
            for a in h.attempts:
                candidate_rejected[reason_key(a.reason)] += 1
            if h.status == "verified":
                verified += 1
            else:
                hop_rejected["no related document" if not h.attempts else reason_key(h.attempts[-1].reason)] += 1
        counts[f"hop{level}"] = (n_recs, verified, dict(hop_rejected))
        counts[f"hop{level}.candidates"] = (n_attempts + verified, verified, dict(candidate_rejected))
        cumulative += spent
        tried = n_attempts + verified
        calls_by_level[str(level)] = {
            "calls": spent, "chains": n_recs, "candidates_tried": tried, "verified": verified,
            "calls_per_candidate": round(spent / tried, 1) if tried else None,
            "calls_per_verified_this_level": round(spent / verified, 1) if verified else None,
            "calls_per_verified_cumulative": round(cumulative / verified, 1) if verified else None}
    per_hop: dict[str, Counter[str]] = {}
    by_hops_type: Counter[tuple[int, str]] = Counter()
    bench_domains: Counter[str] = Counter()
    levels = 0
    for c in chains:
        levels += max(c.depth - 1, 0)
        for level in range(2, c.depth + 1):
            per_hop.setdefault(f"{level}hop", Counter())[c.template] += 1
        if c.depth >= 2:
            by_hops_type[(c.depth, c.template)] += 1
            bench_domains[c.doc_domain] += 1
    counts["export"] = (levels, int(exported.get("items", 0)), {})
    details: dict[str, Any] = {
        "sampling": dict(sampling),
        "per_hop_by_type": {k: dict(v) for k, v in per_hop.items()},
        "chains_by_max_depth": {f"{d}hop/{t}": n for (d, t), n in sorted(by_hops_type.items())},
        "domain_mix_docs": dict(Counter(d.domain for d in selected)),
        "domain_mix_benchmark": dict(bench_domains),
        "calls_by_stage": {"sample": sample_calls, "atomic": atomic_calls},
        "calls_by_level": calls_by_level,
        **notes.as_dict(),
    }
    return counts, details


def _llm_rows(llm: Mapping[str, Any]) -> list[list[Any]]:
    return [[role, ", ".join(f"{k}: {v}" for k, v in stats.items()) if isinstance(stats, Mapping) else stats]
            for role, stats in llm.items()]


def report_sections(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The report's sections from ``metrics.json``."""
    funnel_rows = [[r["stage"], r["in"], r["out"], ", ".join(f"{k}: {v}" for k, v in r["rejected"].items()),
                    r.get("unfinished", 0)] for r in m["funnel"]]
    hop_rows = [[h, t, n] for h, by in sorted(m["per_hop_by_type"].items()) for t, n in sorted(by.items())]
    call_rows = [[lv, v["calls"], v["candidates_tried"], v["calls_per_candidate"], v["verified"],
                  v["calls_per_verified_this_level"], v["calls_per_verified_cumulative"]]
                 for lv, v in m["calls_by_level"].items()]
    unfinished = (f" {m['unfinished']} item(s) unfinished (an outage or a bug): rerun the same command to "
                  "finish them." if m.get("unfinished") else "")
    return [
        {"title": "Funnel", "text": f"Built in {m['wall_s']} s. Sampling: {m['sampling']}.{unfinished}",
         "headers": ["stage", "in", "out", "rejected (reason: count)", "unfinished"], "rows": funnel_rows},
        {"title": "Verified items per hop count and type", "headers": ["hops", "type", "items"], "rows": hop_rows},
        {"title": "LLM calls per hop level (generator + judge)",
         "text": f"sampling {m['calls_by_stage']['sample']}, atomic QA {m['calls_by_stage']['atomic']}",
         "headers": ["level", "calls", "candidates tried", "calls / candidate", "verified",
                     "calls / verified (level)", "calls / verified (cumulative)"], "rows": call_rows},
        {"title": "LLM usage", "text": "Per LLM, keyed by the roles it plays (metrics.json `llm`): cache hits "
         "and misses, calls that reached the backend, tokens.", "headers": ["roles", "usage"],
         "rows": _llm_rows(m.get("llm") or {})},
        {"title": "Gates: verifier, no-answer golds, document cuts",
         "text": "What the verifier LLM decided where strings could not (per check: items kept and rejected), "
                 "no-answer aliases removed from the golds (and, at export, items dropped for a no-answer "
                 "answer), and documents shown cut to `atomic.max_doc_chars` (per stage; none when documents "
                 "are shown whole).",
         "headers": ["what", "count"],
         "rows": [*[[f"verifier: {k}", ", ".join(f"{d}: {n}" for d, n in v.items())]
                    for k, v in (m.get("verifier_decisions") or {}).items()],
                  ["no-answer aliases removed", m.get("no_answer_aliases_removed", 0)],
                  ["export: no-answer", (m.get("export") or {}).get("no_answer", {})],
                  ["documents cut", m.get("doc_cuts", {})]]},
        {"title": "Domain mix (sampled documents)", "headers": ["domain", "docs"],
         "rows": [[k, v] for k, v in sorted(m["domain_mix_docs"].items())]},
        {"title": "Exports", "text": str(m["export"])},
    ]


__all__ = ["tracer_counts", "report_sections", "reason_key", "ChainShape"]
