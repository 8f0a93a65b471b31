"""§3.3: extend a verified chain by one hop (2-hop composition, and extension to 3 and 4 hops).

For the chain's last answer (and, at the first extension, the seed document's title, so a
comparison partner can be found) related documents are retrieved from the KB; documents already in
the chain and documents of excluded benchmarks are skipped. For each of the first
``compose.candidates_per_hop`` of them the LLM writes a new atomic pair and picks the template
(inference: the pair asks about the previous answer; comparison: the same attribute of another
entity), the pair passes the §3.2 filters, the LLM composes the multi-hop question, and the
three-stage verification decides. The first verified candidate becomes the hop; when none is,
the record says why each failed and the chain keeps its shorter verified prefix.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from typing import Any

from agentrag.kb.base import Retriever
from agentrag.records import Hit, Provenance
from agentrag.synth.tracer.atomic import filter_pair
from agentrag.synth.tracer.oracle import Oracle
from agentrag.synth.tracer.outputs import LinkPair, QAPair
from agentrag.synth.tracer.prompts import COMPOSE_SYSTEM, LINK_SYSTEM
from agentrag.synth.tracer.sampling import is_number_page, norm_title
from agentrag.synth.tracer.schema import AtomicPair, Check, Hop, HopRecord
from agentrag.synth.tracer.verify import verify


def related_docs(kb: Retriever, chain: Sequence[Hop], excluded: set[str], k: int, method: str, n: int) -> list[Hit]:
    """Up to ``n`` retrieved documents related to the chain's last hop, not in the chain or excluded."""
    queries = [chain[-1].answer]
    if len(chain) == 1:
        queries.append(chain[0].doc_title)
    kwargs: dict[str, Any] = {"method": method} if "method" in inspect.signature(kb.search).parameters else {}
    results = kb.search(queries, k, **kwargs)
    in_chain = {h.doc_id for h in chain}
    titles = {norm_title(h.doc_title) for h in chain}
    out: list[Hit] = []
    seen: set[str] = set()
    for rank in range(k):  # interleave the queries' rankings
        for hits in results:
            if rank >= len(hits):
                continue
            h = hits[rank]
            t = norm_title(h.title)
            if h.id in in_chain or h.id in seen or t in titles or t in excluded or is_number_page(h.title):
                continue
            seen.add(h.id)
            out.append(h)
    return out[:n]


def _chain_text(chain: Sequence[Hop]) -> str:
    last = chain[-1]
    return (f"Previous question: {last.question}\nPrevious answer: {last.answer}\n"
            f"Previous atomic question: {last.atomic_question}")


def _removed(reply: QAPair) -> dict[str, Any]:
    """The no-answer aliases a reply gave, removed from its golds (counted in the report)."""
    removed = reply.no_answer_aliases()
    return {"no_answer_aliases_removed": removed} if removed else {}


def candidate_hop(oracle: Oracle, chain: Sequence[Hop], doc: Hit, templates: Sequence[str]) -> Hop:
    """Link ``doc`` to the chain, filter the new atomic pair, compose and verify; a failed step is a
    flagged (unverified) hop with the reason and raw output."""
    cfg = oracle.cfg
    level = len(chain) + 1
    allowed = " or ".join(templates)
    user = (f"{_chain_text(chain)}\nAllowed templates: {allowed}\n\nNew passage title: {doc.title}\n"
            f"New passage: {oracle.view(doc.text)}")
    link, prov, err = oracle.json(LINK_SYSTEM, user, LinkPair, name="link", stage=f"hop{level}.link",
                                  max_tokens=cfg.compose.max_tokens, temperature=cfg.compose.temperature)
    base: dict[str, Any] = {"level": level, "doc_id": doc.id, "doc_title": doc.title, "doc_text": doc.text}
    if err is not None or link is None or link.template not in templates:
        why = err or (f"malformed: template {link.template!r} not allowed here" if link else "parse_error: no pair")
        return Hop(**base, template="inference", atomic_question="", atomic_answer="", question="", answer="",
                   reason=f"link: {why}", checks=[Check(name="link", passed=False, reason=f"link: {why}",
                                                        raw=[prov.raw_output or ""])])
    template, q, a, aliases = link.template, link.question, link.answer, link.clean_aliases()
    pair = filter_pair(oracle, AtomicPair(id=f"h{level}", question=q, answer=a, aliases=aliases),
                       (doc.title, doc.text))
    atomic: dict[str, Any] = {"template": template, "atomic_question": q, "atomic_answer": a, "atomic_aliases": aliases}
    checks = [Check(name="link", passed=True, raw=[prov.raw_output or ""], details=_removed(link)), *pair.checks]
    if pair.status != "accepted":
        return Hop(**base, **atomic, question="", answer="", reason=f"atomic: {pair.reason}", checks=checks)
    last = chain[-1]
    user = (f"Template: {template}\nFirst question: {last.question}\nFirst answer: {last.answer}\n"
            f"Second question: {q}\nSecond answer: {a}")
    composed, prov, err = oracle.json(COMPOSE_SYSTEM, user, QAPair, name="compose", stage=f"hop{level}.compose",
                                      max_tokens=cfg.compose.max_tokens, temperature=cfg.compose.temperature)
    if err is not None or composed is None:
        why = err or "parse_error: no question/answer"
        checks.append(Check(name="compose", passed=False, reason=f"compose: {why}", raw=[prov.raw_output or ""]))
        return Hop(**base, **atomic, question="", answer="", reason=f"compose: {why}", checks=checks)
    cq, ca, caliases = composed.question, composed.answer, composed.clean_aliases()
    if template == "inference" and not caliases:
        caliases = aliases  # the final answer of an inference step is the new atomic answer
    checks.append(Check(name="compose", passed=True, raw=[prov.raw_output or ""], details=_removed(composed)))
    cand = Hop(**base, **atomic, question=cq, answer=ca, aliases=caliases, checks=checks)
    return verify(oracle, chain, cand)


def extend(oracle: Oracle, kb: Retriever, chain_id: str, chain: Sequence[Hop], excluded: set[str]) -> HopRecord:
    """Try to extend ``chain`` (its verified hops) by one hop; returns the ``hop<level>`` record."""
    start = time.monotonic()
    cfg = oracle.cfg.compose
    level = len(chain) + 1
    templates = ["inference", "comparison"] if level == 2 else list(dict.fromkeys(cfg.extension_templates))
    rid = f"{chain_id}-h{level}"
    prov = Provenance(stage=f"hop{level}", model=getattr(oracle.llm, "model", ""))
    docs = related_docs(kb, chain, excluded, cfg.retrieve_k, cfg.method, cfg.candidates_per_hop)
    attempts: list[Hop] = []
    for doc in docs:
        hop = candidate_hop(oracle, chain, doc, templates)
        if hop.verified:
            return HopRecord(id=rid, chain_id=chain_id, level=level, status="verified", hop=hop, attempts=attempts,
                             calls=oracle.calls, cuts=oracle.cuts, elapsed=time.monotonic() - start, provenance=prov)
        attempts.append(hop)
    reason = "no related document retrieved" if not docs else "; ".join(a.reason or "?" for a in attempts)
    return HopRecord(id=rid, chain_id=chain_id, level=level, status="failed", reason=reason, attempts=attempts,
                     calls=oracle.calls, cuts=oracle.cuts, elapsed=time.monotonic() - start, provenance=prov)


__all__ = ["related_docs", "candidate_hop", "extend"]
