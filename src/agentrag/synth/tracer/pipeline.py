"""Tracer builder stages: sample -> select -> atomic QA -> hop2 -> hop3 -> hop4 -> exports.

Stage files of the run directory (append-only, keyed by stable ids, resumed on rerun):
``docs.jsonl`` (sampled + annotated documents), ``atomic.jsonl`` (one record per selected document
with its filtered pairs), ``hop2.jsonl`` .. ``hop4.jsonl`` (one record per chain and level: the
verified hop or the failed attempts). Per-document and per-chain work runs through the driver's
executor seam under the failure policy (:meth:`agentrag.synth.driver.SynthRun.stage`); the
functions return records and only the driver writes them. Unparsable model output, or a request
over the context window, is a flagged record (the chain keeps its verified prefix); an outage
leaves the item unfinished (nothing written: a hop whose verification call failed is neither
verified nor rejected); a 401/404 stops the run. The per-item functions are module-level over
plain data, so on the Ray executor they run in worker processes that rebuild the components with
``TracerComponents.rebuild`` (see :mod:`agentrag.synth.worker`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import Passage
from agentrag.runs import JsonlStore
from agentrag.synth.driver import PendingStage, Pipeline, PipelineStep, SynthOutput, SynthRun, ids_key
from agentrag.synth.tracer import sampling
from agentrag.synth.tracer.atomic import atomic_qa
from agentrag.synth.tracer.chains import iter_chains, seed_hop
from agentrag.synth.tracer.compose import extend
from agentrag.synth.tracer.config import TracerConfig
from agentrag.synth.tracer.export import export_benchmark
from agentrag.synth.tracer.oracle import Oracle
from agentrag.synth.tracer.report import ChainShape, tracer_counts
from agentrag.synth.tracer.schema import AtomicRecord, Chain, DocRecord, HopRecord
from agentrag.synth.worker import ComponentsTask


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
    return sampling.annotate(Oracle(c.llm, c.judge, cfg, doc.id), doc)


def _atomic(cfg: TracerConfig, c: TracerComponents, doc: DocRecord) -> AtomicRecord:
    return atomic_qa(Oracle(c.llm, c.judge, cfg, f"{doc.id}-atomic"), doc)


def _extend(cfg: TracerConfig, c: TracerComponents, chain: Chain) -> HopRecord:
    oracle = Oracle(c.llm, c.judge, cfg, f"{chain.id}-h{chain.depth + 1}")
    return extend(oracle, c.kb, chain.id, chain.hops, set(c.excluded_titles))


class TracerStages:
    """The stages over one run directory (see the module docstring); the driver's ``execute``."""

    def __init__(self, ctx: SynthRun, cfg: TracerConfig, comps: TracerComponents):
        self.ctx, self.cfg, self.c = ctx, cfg, comps
        run = ctx.run
        self.docs = run.stage_file("docs", DocRecord)
        self.atomic = run.stage_file("atomic", AtomicRecord)
        self.hops = {level: run.stage_file(f"hop{level}", HopRecord) for level in range(2, cfg.max_hops + 1)}
        self.sampling_stats: dict[str, int] = {}
        self.selected: list[DocRecord] = []  # the documents :meth:`sample` selected
        self.candidates: list[str] = []  # the ids of the documents :meth:`sample` considered, in KB order

    def _stage(self, name: str, fn: Callable[..., Any], todo: list[Any], store: JsonlStore[Any]) -> None:
        self.ctx.stage(name, self._task(fn), todo, on_result=lambda _item, rec: store.append(rec))

    def sample(self) -> list[DocRecord]:
        """Annotate the candidates not yet annotated, then select up to ``docs`` of them."""
        c = self.c
        cands = sampling.candidates(c.passages, self.cfg, set(c.excluded_titles))
        self.sampling_stats = {"kb_passages": len(c.passages), "candidates": len(cands),
                               "excluded_titles": len(c.excluded_titles),
                               "number_title_pages": sum(sampling.is_number_page(p.title) for p in c.passages),
                               "kb_passages_excluded": sum(sampling.norm_title(p.title) in c.excluded_titles
                                                           for p in c.passages)}
        self._stage("sample", _annotate, [d for d in cands if d.id not in self.docs], self.docs)
        self.candidates = [d.id for d in cands]
        pos = {k: i for i, k in enumerate(self.candidates)}
        # in candidate order, not the order the annotations finished in: the same documents at any concurrency
        annotated = sorted((d for d in self.docs if d.id in pos), key=lambda d: pos[d.id])
        return sampling.select(annotated, self.cfg.docs, self.cfg.sampling.max_per_type)

    def _task(self, fn: Callable[..., Any]) -> ComponentsTask:
        return ComponentsTask(partial(fn, self.cfg), self.c, self.c.rebuild, what="Tracer components")

    def atomic_stage(self, docs: list[DocRecord]) -> None:
        """Atomic QA of the selected documents, and the hops of their chains: hop k+1 of a chain
        needs only that chain's verified hop k (and the fixed KB), so it starts as soon as that
        record is written, overlapping the other documents and chains (:meth:`SynthRun.flow`).
        The sampling before it is a barrier: the selection by type quota needs every annotation."""

        def write_atomic(doc: DocRecord, rec: AtomicRecord) -> list[tuple[str, Any]]:
            self.atomic.append(rec)
            if 2 not in self.hops:
                return []
            chains = [Chain(id=p.id, doc_domain=doc.domain, hops=[seed_hop(doc, p)])
                      for p in rec.pairs if p.status == "accepted"]
            return [("hop2", c) for c in chains if f"{c.id}-h2" not in self.hops[2]]

        def writer(level: int) -> Callable[[Chain, HopRecord], list[tuple[str, Any]]]:
            def write(chain: Chain, rec: HopRecord) -> list[tuple[str, Any]]:
                self.hops[level].append(rec)
                nxt = level + 1
                if rec.status != "verified" or rec.hop is None or nxt not in self.hops:
                    return []
                if f"{chain.id}-h{nxt}" in self.hops[nxt]:
                    return []
                return [(f"hop{nxt}", chain.model_copy(update={"hops": [*chain.hops, rec.hop]}))]
            return write

        steps: dict[str, tuple[Callable[[Any], Any], Any]] = {"atomic": (self._task(_atomic), write_atomic)}
        for level in self.hops:
            steps[f"hop{level}"] = (self._task(_extend), writer(level))
        self.ctx.flow(steps, [("atomic", d) for d in docs if f"{d.id}-atomic" not in self.atomic])

    def chains(self, docs: list[DocRecord], want: Callable[[str, int], bool] | None = None) -> Iterator[Chain]:
        """The chains of ``docs``, one at a time (:func:`~agentrag.synth.tracer.chains.iter_chains`)."""
        return iter_chains(docs, self.atomic, {level: store.path for level, store in self.hops.items()}, want)

    def extend_catch_up(self, level: int) -> PendingStage[Chain, HopRecord]:
        """The hop ``level`` of chains still without it (from an earlier run; this run's chains
        were extended in :meth:`atomic_stage`'s flow; one it left unfinished waits for a rerun)."""
        store = self.hops[level]

        def pending() -> list[Chain]:
            return list(self.chains(self.selected, lambda cid, depth: depth == level - 1 and f"{cid}-h{level}" not in store))

        return PendingStage(f"hop{level}", self._task(_extend), pending, lambda _item, rec: store.append(rec))

    def pipeline(self) -> Pipeline:
        """Sampling, then atomic QA and the hops as one flow, then each level's catch-up; the
        report (exports and statistics) reused on a rerun that changed no file of the run."""
        def sample_and_extend() -> None:
            self.selected = self.sample()
            self.atomic_stage(self.selected)

        steps: list[PipelineStep] = [sample_and_extend, *(self.extend_catch_up(level) for level in self.hops)]
        return Pipeline(steps=steps, report=self.report, report_key=self.report_key, order=lambda: self.candidates)

    def report_key(self) -> str:
        return ids_key(d.id for d in self.selected) + json.dumps(self.sampling_stats, sort_keys=True)

    def report(self) -> SynthOutput:
        shapes: list[ChainShape] = []  # what the statistics need of a chain, kept as it is exported
        exported = export_benchmark(ChainShape.noting(self.chains(self.selected), shapes), self.ctx.run.path)
        counts, details = tracer_counts(self.docs, self.selected, self.atomic, dict(self.hops), shapes,  # streamed
                                        exported, self.sampling_stats)
        return SynthOutput(counts=counts, export=exported, details=details)


__all__ = ["TracerComponents", "TracerStages", "seed_hop"]
