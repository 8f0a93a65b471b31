"""Tracer builder orchestration: sample -> atomic QA -> hop2 -> hop3 -> hop4 -> exports + report.

Stage files of the run directory (append-only, keyed by stable ids, resumed on rerun):
``docs.jsonl`` (sampled + annotated documents), ``atomic.jsonl`` (one record per selected document
with its filtered pairs), ``hop2.jsonl`` .. ``hop4.jsonl`` (one record per chain and level: the
verified hop or the failed attempts). Per-document and per-chain work runs through the executor
seam; the functions return records and only this driver writes them. A model failure is a
flagged record (the chain keeps its verified prefix); an outage or a lost worker leaves the item
unfinished. The per-item functions are module-level over plain data, so on the Ray executor they
run in worker processes that rebuild the components with ``TracerComponents.rebuild`` (see
:mod:`agentrag.synth.worker`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from agentrag.exec import Executor, ThreadExecutor, run_items
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import Passage
from agentrag.runs import RunDir
from agentrag.synth.common import Progress
from agentrag.synth.tracer import sampling
from agentrag.synth.tracer.atomic import atomic_qa
from agentrag.synth.tracer.compose import extend
from agentrag.synth.tracer.config import TracerConfig
from agentrag.synth.tracer.oracle import Oracle
from agentrag.synth.tracer.schema import AtomicRecord, Chain, DocRecord, Hop, HopRecord
from agentrag.synth.worker import ComponentsTask

log = logging.getLogger(__name__)


@dataclass
class TracerComponents:
    """What a run talks to: the generator/answerer/auditor LLM, the judge, the KB and its passages."""

    llm: LLM
    kb: Retriever
    passages: Sequence[Passage]
    judge: LLM | None = None
    excluded_titles: frozenset[str] = frozenset()
    rebuild: Callable[[], TracerComponents] | None = None  # the recipe a worker process builds them from


def _annotate(cfg: TracerConfig, c: TracerComponents, doc: DocRecord) -> DocRecord:
    return sampling.annotate(Oracle(c.llm, c.judge, cfg), doc)


def _atomic(cfg: TracerConfig, c: TracerComponents, doc: DocRecord) -> AtomicRecord:
    return atomic_qa(Oracle(c.llm, c.judge, cfg), doc)


def _extend(cfg: TracerConfig, c: TracerComponents, chain: Chain) -> HopRecord:
    return extend(Oracle(c.llm, c.judge, cfg), c.kb, chain.id, chain.hops, set(c.excluded_titles))


def seed_hop(doc: DocRecord, pair: Any) -> Hop:
    """Hop 1 of a chain: the accepted atomic pair on its sampled document."""
    return Hop(level=1, template="atomic", atomic_question=pair.question, atomic_answer=pair.answer,
               atomic_aliases=pair.aliases, doc_id=doc.passage_id, doc_title=doc.title, doc_text=doc.text,
               question=pair.question, answer=pair.answer, aliases=pair.aliases, verified=True, checks=pair.checks)


class TracerPipeline:
    """Runs every stage over a run directory (see the module docstring)."""

    def __init__(self, run: RunDir, cfg: TracerConfig, comps: TracerComponents, progress: Progress | None = None,
                 executor: Executor | None = None):
        self.run_dir, self.cfg, self.c, self.progress = run, cfg, comps, progress
        self.executor: Executor = executor or ThreadExecutor(cfg.concurrency)
        self.docs = run.stage("docs", DocRecord)
        self.atomic = run.stage("atomic", AtomicRecord)
        self.hops = {level: run.stage(f"hop{level}", HopRecord) for level in range(2, cfg.max_hops + 1)}
        self.sampling_stats: dict[str, int] = {}

    def oracle(self) -> Oracle:
        return Oracle(self.c.llm, self.c.judge, self.cfg)

    def _run(self, stage: str, fn: Callable[..., Any], todo: list[Any], store: Any) -> None:
        task = ComponentsTask(partial(fn, self.cfg), self.c, self.c.rebuild, what="Tracer components")
        failed = run_items(self.executor, task, todo, stage=stage, progress=self.progress,
                           on_result=lambda _item, rec: store.append(rec))
        for out in failed:  # outages (and bugs) leave the item unfinished; rerun retries it
            log.warning("%s: item left unfinished (%s: %s); rerun to retry it", stage, type(out.error).__name__,
                        out.error)

    # --- stages -------------------------------------------------------------------------------
    def sample(self) -> list[DocRecord]:
        cands = sampling.candidates(self.c.passages, self.cfg, set(self.c.excluded_titles))
        self.sampling_stats = {"kb_passages": len(self.c.passages), "candidates": len(cands),
                               "excluded_titles": len(self.c.excluded_titles),
                               "kb_passages_excluded": sum(sampling.norm_title(p.title) in self.c.excluded_titles
                                                           for p in self.c.passages)}
        todo = [d for d in cands if d.id not in self.docs]
        self._run("sample", _annotate, todo, self.docs)
        wanted = {d.id for d in cands}
        return sampling.select([d for d in self.docs if d.id in wanted], self.cfg.docs,
                               self.cfg.sampling.max_per_type)

    def atomic_stage(self, docs: list[DocRecord]) -> None:
        todo = [d for d in docs if f"{d.id}-atomic" not in self.atomic]
        self._run("atomic", _atomic, todo, self.atomic)

    def chains(self, docs: list[DocRecord] | None = None) -> list[Chain]:
        """Every chain with its verified hops, assembled from the stage files."""
        by_doc = {d.id: d for d in (docs if docs is not None else self.docs.read())}
        hop_recs = {level: {r.chain_id: r for r in store} for level, store in self.hops.items()}
        out: list[Chain] = []
        for rec in self.atomic:
            doc = by_doc.get(rec.doc_id)
            if doc is None:
                continue
            for pair in rec.pairs:
                if pair.status != "accepted":
                    continue
                hops = [seed_hop(doc, pair)]
                for level in range(2, self.cfg.max_hops + 1):
                    r = hop_recs[level].get(pair.id)
                    if r is None or r.status != "verified" or r.hop is None:
                        break
                    hops.append(r.hop)
                out.append(Chain(id=pair.id, doc_domain=doc.domain, hops=hops))
        return out

    def extend_stage(self, level: int, docs: list[DocRecord]) -> None:
        store = self.hops[level]
        todo = [c for c in self.chains(docs) if c.depth == level - 1 and f"{c.id}-h{level}" not in store]
        self._run(f"hop{level}", _extend, todo, store)

    # --- the whole run ------------------------------------------------------------------------
    def run(self, name: str = "") -> dict[str, Any]:
        start = time.monotonic()
        docs = self.sample()
        self.atomic_stage(docs)
        for level in range(2, self.cfg.max_hops + 1):
            self.extend_stage(level, docs)
        from agentrag.synth.tracer.export import export_benchmark
        from agentrag.synth.tracer.report import build_metrics, write_tracer_report

        chains = self.chains(docs)
        exported = export_benchmark(chains, self.run_dir.path)
        metrics = build_metrics(self, docs, chains, exported, time.monotonic() - start, name or self.run_dir.path.name)
        self.run_dir.write_json("metrics.json", metrics)
        write_tracer_report(self.run_dir.path, metrics)
        return metrics


__all__ = ["TracerPipeline", "TracerComponents", "seed_hop"]
