"""``EvalTask``: the picklable per-item function of ``agentrag eval`` for distributed executors.

It carries only the resolved :class:`EvalConfig` (as a dict) and the run's LLM cache path; in each
worker process it builds the agent LLM (``resolve_llm``: an OpenAI-compatible endpoint is shared,
the embedded model loads once per process), the retriever (a KB directory loaded read-only, or a
retrieval server URL), the agent and the judge, on the first item. The driver writes the results.

LLM cache: every worker opens the run's ``llm_cache.sqlite`` itself. The cache is a WAL-mode
SQLite file with a busy timeout and first-writer-wins inserts, so processes on one host share it
safely; on several nodes the run directory must be on a filesystem all nodes see, or each node
points ``AGENTRAG_WORKER_CACHE_DIR`` at a local directory (see docs/scale.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrag.exec import WorkerTask
from agentrag.llm.cache import worker_cache_path
from agentrag.records import QAItem


class EvalTask(WorkerTask):
    """Builds agent + judge from ``config`` (an :class:`EvalConfig` dump) once per worker process."""

    def __init__(self, config: dict[str, Any], cache: str | Path | None = None) -> None:
        super().__init__()
        self.config = dict(config)
        self.cache = None if cache is None else str(cache)

    def setup(self) -> Any:
        from agentrag.threads import passive_openmp

        passive_openmp()  # llama.cpp threads on a shared CPU
        from agentrag.agents import build_agent
        from agentrag.eval.judge import LLMJudge
        from agentrag.eval.runner import EvalConfig
        from agentrag.kb import resolve_retriever
        from agentrag.llm import resolve_llm

        cfg = EvalConfig.model_validate(self.config)
        cache = worker_cache_path(self.cache)
        agent = build_agent(cfg.agent, resolve_llm(cfg.llm, cache=cache), resolve_retriever(cfg.kb),
                            **cfg.agent_config)
        judge = LLMJudge(resolve_llm(cfg.judge, cache=cache)) if cfg.judge else None
        return agent, judge, cfg.correct_by

    def run(self, state: Any, item: QAItem) -> Any:
        from agentrag.eval.runner import run_and_score

        agent, judge, correct_by = state
        return run_and_score(agent, item, judge, correct_by)


__all__ = ["EvalTask"]
