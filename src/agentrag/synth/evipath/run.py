"""``run_evipath``: what ``agentrag synth evipath`` does, as a library call (the CLI only parses
arguments and prints)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor
from agentrag.kb.base import Embedder
from agentrag.paths import check_out_dir
from agentrag.runs import RunDir
from agentrag.synth.evipath.config import EviPathRunConfig
from agentrag.synth.evipath.inputs import read_items
from agentrag.synth.evipath.pipeline import EviPathComponents, EviPathPipeline, Progress
from agentrag.synth.evipath.schema import EviItem


def _embedder_factory(embedder: str | None, kb: Any) -> Any:
    def build() -> Embedder:
        if embedder:
            from agentrag.kb.embedders import load_embedder

            return load_embedder(embedder)
        if kb is not None and hasattr(kb, "embedder"):
            return kb.embedder  # type: ignore[no-any-return]
        from agentrag.kb.embedders import load_embedder

        return load_embedder()

    return build


@dataclass
class EviPathBuilder:
    """Plain-data recipe of a run's components, rebuilt in worker processes (the Ray executor): the
    planner and executor LLMs on the run's cache, the KB loaded read-only (or its server), φ."""

    llm: str
    executor_llm: str | None
    kb: str | None
    embedder: str | None
    run_dir: str

    @classmethod
    def from_config(cls, cfg: EviPathRunConfig, run_dir: str | os.PathLike[str]) -> EviPathBuilder:
        return cls(llm=cfg.llm, executor_llm=cfg.executor_llm, kb=cfg.kb, embedder=cfg.executor.embedder,
                   run_dir=str(run_dir))

    def __call__(self) -> EviPathComponents:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from agentrag.synth.worker import resolve_role_llms

        kb = None
        if self.kb:
            from agentrag.kb import resolve_retriever

            kb = resolve_retriever(self.kb)
        llms = resolve_role_llms({"planner": self.llm, "executor": self.executor_llm or self.llm}, self.run_dir)
        return EviPathComponents(planner=llms["planner"], executor=llms["executor"],
                                 embedder=_embedder_factory(self.embedder, kb), retriever=kb, rebuild=self)


def check_inputs(cfg: EviPathRunConfig, out: str | os.PathLike[str]) -> tuple[list[EviItem], Any]:
    """Everything a run needs, checked before anything is written: (items, KB or None)."""
    from agentrag.llm.resolve import check_llm_ref

    if not cfg.datasets:
        raise UserError("no dataset: pass --dataset FILE (raw HotpotQA, 2WikiMultihopQA or MuSiQue)")
    if cfg.mode == "deductive" and not cfg.kb:
        raise UserError("--mode deductive runs the planner_executor agent on a knowledge base: pass --kb DIR")
    check_out_dir(out)
    for ref in dict.fromkeys([cfg.llm, cfg.executor_llm or cfg.llm]):
        check_llm_ref(ref)
    items = [it for path in cfg.datasets for it in read_items(path, skip_invalid=cfg.skip_invalid, limit=cfg.limit)]
    kb = None
    if cfg.kb:
        from agentrag.kb import resolve_retriever

        kb = resolve_retriever(cfg.kb)
    return items, kb


def run_evipath(cfg: EviPathRunConfig, out: str | os.PathLike[str], *, progress: Progress | None = None,
                executor: Executor | None = None) -> dict[str, Any]:
    """Read the datasets, synthesize, gate, export and report into the run directory ``out``.

    Returns the metrics (also in ``out/metrics.json``), with the LLM cache statistics per role.
    """
    items, kb = check_inputs(cfg, out)
    run = RunDir(out)
    run.write_config(cfg)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # llama.cpp threads wait passively on a shared CPU
    from agentrag.llm import resolve_llm

    cache = run.file("llm_cache.sqlite")
    planner = resolve_llm(cfg.llm, cache=cache)
    executor_llm = planner if (cfg.executor_llm or cfg.llm) == cfg.llm else resolve_llm(cfg.executor_llm or cfg.llm,
                                                                                        cache=cache)
    comps = EviPathComponents(planner=planner, executor=executor_llm, embedder=_embedder_factory(cfg.executor.embedder, kb),
                              retriever=kb, rebuild=EviPathBuilder.from_config(cfg, run.path))
    metrics = EviPathPipeline(run, cfg, comps, progress=progress, executor=executor).run(items, Path(out).name)
    roles = {"planner+executor": planner} if executor_llm is planner else {"planner": planner, "executor": executor_llm}
    metrics["llm_calls"] = {k: v.stats() for k, v in roles.items() if hasattr(v, "stats")}
    run.write_json("metrics.json", metrics)
    return metrics


__all__ = ["run_evipath", "check_inputs", "EviPathBuilder"]
