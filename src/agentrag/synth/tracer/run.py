"""``run_tracer``: what ``agentrag synth tracer`` does, as a library call, and the plain-data recipe
a worker process rebuilds the components from (the Ray executor)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor
from agentrag.runs import RunDir
from agentrag.synth.common import Progress
from agentrag.synth.tracer.config import TracerRunConfig
from agentrag.synth.tracer.pipeline import TracerComponents, TracerPipeline


@dataclass
class TracerBuilder:
    """Plain-data recipe of a run's components: the LLM and judge on the run's cache, the KB loaded
    read-only, the excluded titles. Workers get no passage list (only the driver samples)."""

    llm: str
    judge: str | None
    kb: str
    run_dir: str
    excluded_titles: tuple[str, ...] = ()

    def __call__(self) -> TracerComponents:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from agentrag.kb import KnowledgeBase
        from agentrag.synth.worker import resolve_role_llms

        llms = resolve_role_llms({"llm": self.llm, "judge": self.judge or self.llm}, self.run_dir)
        return TracerComponents(llm=llms["llm"], judge=llms["judge"], kb=KnowledgeBase.load(self.kb), passages=(),
                                excluded_titles=frozenset(self.excluded_titles), rebuild=self)


def run_tracer(cfg: TracerRunConfig, out: str | os.PathLike[str], *, progress: Progress | None = None,
               executor: Executor | None = None) -> dict[str, Any]:
    """Build the benchmark into the run directory ``out`` (rerun = resume); returns the metrics
    (also in ``out/metrics.json``) with the LLM cache statistics."""
    from agentrag.kb import KnowledgeBase
    from agentrag.llm import resolve_llm
    from agentrag.synth.tracer.sampling import excluded_titles

    if not cfg.kb:
        raise UserError("no knowledge base: pass --kb DIR (build one with `agentrag kb build`)")
    excluded = frozenset(excluded_titles(cfg.exclude))  # bad files fail before anything is written
    main_kb = KnowledgeBase.load(cfg.kb)
    run = RunDir(out)
    run.write_config(cfg)
    cache = run.file("llm_cache.sqlite")
    gen = resolve_llm(cfg.llm, cache=cache)
    judge_llm = gen if (cfg.judge or cfg.llm) == cfg.llm else resolve_llm(cfg.judge or cfg.llm, cache=cache)
    rebuild = TracerBuilder(llm=cfg.llm, judge=cfg.judge, kb=str(cfg.kb), run_dir=str(run.path),
                            excluded_titles=tuple(sorted(excluded)))
    comps = TracerComponents(llm=gen, judge=judge_llm, kb=main_kb, passages=list(main_kb.passages()),
                             excluded_titles=excluded, rebuild=rebuild)
    metrics = TracerPipeline(run, cfg, comps, progress=progress, executor=executor).run()
    metrics["llm_stats"] = {"llm": gen.stats() if hasattr(gen, "stats") else None,
                            "judge": judge_llm.stats() if judge_llm is not gen and hasattr(judge_llm, "stats")
                            else "same as llm"}
    run.write_json("metrics.json", metrics)
    return metrics


__all__ = ["run_tracer", "TracerBuilder"]
