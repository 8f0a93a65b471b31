"""``run_reasonrag``: a whole ReasonRAG run from its config, the one entry point of the CLI and the
Python API. It checks every input before it writes anything (datasets, KB reference, LLM
references, output path), then opens the run directory, resolves the LLMs with the run's
response cache and the retriever, and runs the pipeline; ``metrics.json`` carries the LLM cache
statistics of the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor
from agentrag.records import QAItem
from agentrag.runs import RunDir, check_out_dir
from agentrag.synth.common import Progress
from agentrag.synth.reasonrag.config import ReasonRagRunConfig
from agentrag.synth.reasonrag.pipeline import ReasonRagComponents, ReasonRagPipeline


def load_questions(cfg: ReasonRagRunConfig) -> list[QAItem]:
    """The questions of every ``cfg.dataset`` file (first ``cfg.limit`` of each); ids must be unique."""
    from agentrag.eval.datasets import load_dataset

    if not cfg.dataset:
        raise UserError("no dataset: pass --dataset FILE (repeatable)")
    items: list[QAItem] = []
    seen: dict[str, str] = {}
    for path in cfg.dataset:
        for it in load_dataset(path, limit=cfg.limit):
            if it.id in seen:
                raise UserError(f"{path}: question id {it.id!r} also occurs in {seen[it.id]}; ids must be unique "
                                "across --dataset files")
            if not it.golden_answers:
                raise UserError(f"{path}: question {it.id!r} has no gold answer (SPRE and the judge need one)")
            seen[it.id] = path
            it.metadata["source"] = Path(path).name
            items.append(it)
    return items


def check_inputs(cfg: ReasonRagRunConfig, out: str | os.PathLike[str]) -> list[QAItem]:
    """Everything a run needs, checked before anything is written; returns the questions."""
    from agentrag.llm.resolve import check_llm_ref

    items = load_questions(cfg)
    if not cfg.kb:
        raise UserError("no knowledge base: pass --kb DIR or --kb http://host:port")
    check_out_dir(out)
    for ref in dict.fromkeys([cfg.llm, cfg.judge or cfg.llm]):
        check_llm_ref(ref)
    return items


@dataclass
class ReasonRagBuilder:
    """Plain-data recipe of a run's components, rebuilt in worker processes (the Ray executor): the
    policy and judge LLMs on the run's cache and the retriever (a KB directory loaded read-only, or
    a retrieval server URL)."""

    llm: str
    judge: str | None
    kb: str
    run_dir: str

    @classmethod
    def from_config(cls, cfg: ReasonRagRunConfig, run_dir: str | os.PathLike[str]) -> ReasonRagBuilder:
        return cls(llm=cfg.llm, judge=cfg.judge, kb=cfg.kb or "", run_dir=str(run_dir))

    def __call__(self) -> ReasonRagComponents:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from agentrag.kb import resolve_retriever
        from agentrag.synth.worker import resolve_role_llms

        refs = {"policy": self.llm}
        if self.judge and self.judge != self.llm:
            refs["judge"] = self.judge
        llms = resolve_role_llms(refs, self.run_dir)
        return ReasonRagComponents(llm=llms["policy"], retriever=resolve_retriever(self.kb), judge=llms.get("judge"),
                                   rebuild=self)


def run_reasonrag(cfg: ReasonRagRunConfig, out: str | os.PathLike[str], *, progress: Progress | None = None,
                  executor: Executor | None = None) -> dict[str, Any]:
    """Run ReasonRAG into the run directory ``out`` (rerun = resume); returns the metrics."""
    from agentrag.kb import resolve_retriever
    from agentrag.llm import resolve_llm

    items = check_inputs(cfg, out)
    retriever = resolve_retriever(cfg.kb or "")
    run = RunDir(out)
    run.write_config(cfg)
    cache = run.file("llm_cache.sqlite")
    policy = resolve_llm(cfg.llm, cache=cache)
    judge = None if not cfg.judge or cfg.judge == cfg.llm else resolve_llm(cfg.judge, cache=cache)
    comps = ReasonRagComponents(llm=policy, retriever=retriever, judge=judge,
                                rebuild=ReasonRagBuilder.from_config(cfg, run.path))
    pipeline = ReasonRagPipeline(run, cfg, comps, progress=progress, executor=executor)
    metrics = pipeline.run(items, name=run.path.name)
    stats = {name: getattr(obj, "stats", None) for name, obj in (("policy", policy), ("judge", judge))}
    metrics["llm_cache"] = {name: fn() for name, fn in stats.items() if callable(fn)}
    run.write_json("metrics.json", metrics)
    return metrics


__all__ = ["run_reasonrag", "check_inputs", "load_questions", "ReasonRagBuilder"]
