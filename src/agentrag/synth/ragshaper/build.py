"""Rebuild RAGShaper's components inside a worker process (the Ray executor).

:class:`ComponentsBuilder` is plain data (LLM references, KB directory, run directory), so it
pickles to Ray workers, where it resolves the LLMs (an OpenAI-compatible endpoint is shared; the
embedded model loads once per worker process), loads K read-only and opens the K~ directory the
driver built. Workers use the run's LLM cache (WAL SQLite; see :mod:`agentrag.eval.worker`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrag.records import Passage
from agentrag.synth.ragshaper.config import RagShaperRunConfig
from agentrag.synth.ragshaper.pipeline import RagShaperComponents


@dataclass
class OpenDistractorKB:
    """In a worker: open the K~ directory the driver built (read-only)."""

    directory: str

    def __call__(self, passages: list[Passage]) -> Any:  # noqa: ARG002 - the driver built it from them
        from agentrag.kb import KnowledgeBase

        return KnowledgeBase.load(self.directory)


@dataclass
class ComponentsBuilder:
    """Plain-data recipe of a run's components (picklable; see the module doc)."""

    kb: str
    llm: str
    teacher: str | None
    tagger: str | None
    run_dir: str

    @classmethod
    def from_config(cls, cfg: RagShaperRunConfig, run_dir: str | Path) -> ComponentsBuilder:
        return cls(kb=str(cfg.kb), llm=cfg.llm, teacher=cfg.teacher, tagger=cfg.tagger, run_dir=str(run_dir))

    def open_distractor_kb(self) -> OpenDistractorKB:
        return OpenDistractorKB(str(Path(self.run_dir) / "distractor_kb"))

    def __call__(self) -> RagShaperComponents:
        from agentrag.kb import KnowledgeBase
        from agentrag.synth.ragshaper.run import distractor_kb_factory
        from agentrag.synth.worker import resolve_role_llms

        main_kb = KnowledgeBase.load(self.kb)
        llms = resolve_role_llms({"curator": self.llm, "teacher": self.teacher or self.llm,
                                  "tagger": self.tagger or self.llm}, self.run_dir)
        return RagShaperComponents(curator=llms["curator"], teacher=llms["teacher"], main_kb=main_kb,
                                   tagger=llms["tagger"],
                                   distractor_kb=distractor_kb_factory(main_kb, Path(self.run_dir) / "distractor_kb"),
                                   rebuild=self, open_distractor_kb=self.open_distractor_kb())


__all__ = ["ComponentsBuilder", "OpenDistractorKB"]
