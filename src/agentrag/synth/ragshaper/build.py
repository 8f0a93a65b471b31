"""Build RAGShaper's components from plain references: in the driver and inside a worker process
(the Ray executor) alike.

:class:`RagShaperRecipe` is plain data (LLM references, KB directory, run directory), so it
pickles to Ray workers, where it resolves the LLMs (an OpenAI-compatible endpoint is shared; the
embedded model loads once per worker process), loads K read-only and opens the K~ directory the
driver built. Workers use the run's LLM cache (WAL SQLite; see :mod:`agentrag.eval.worker`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrag.records import Passage
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import RagShaperRunConfig


def distractor_kb_factory(main_kb: Any, directory: Path) -> Callable[[list[Passage]], Any]:
    """Builds K~ with the main KB's embedder (rebuilt from distractors.jsonl on every run, so
    resume never duplicates it)."""

    def build(passages: list[Passage]) -> Any:
        from agentrag.kb import KnowledgeBase

        config = main_kb.config.model_copy(update={"name": "distractor", "method": "dense"})
        return KnowledgeBase.build(passages, directory, config, embedder=main_kb.embedder, overwrite=True,
                                   progress=False)

    return build


@dataclass
class OpenDistractorKB:
    """In a worker: open the K~ directory the driver built (read-only)."""

    directory: str

    def __call__(self, passages: list[Passage]) -> Any:  # noqa: ARG002 - the driver built it from them
        from agentrag.kb import KnowledgeBase

        return KnowledgeBase.load(self.directory)


def role_refs(llm: str, teacher: str | None, tagger: str | None) -> dict[str, str]:
    """``{role: LLM reference}``: the teacher and the tagger default to the curator's LLM."""
    return {"curator": llm, "teacher": teacher or llm, "tagger": tagger or llm}


@dataclass
class RagShaperRecipe:
    """Plain-data recipe of a run's components (picklable; see the module doc)."""

    kb: str
    llm: str
    teacher: str | None
    tagger: str | None
    run_dir: str

    @classmethod
    def from_config(cls, cfg: RagShaperRunConfig, run_dir: str | Path) -> RagShaperRecipe:
        return cls(kb=str(cfg.kb), llm=cfg.llm, teacher=cfg.teacher, tagger=cfg.tagger, run_dir=str(run_dir))

    def open_distractor_kb(self) -> OpenDistractorKB:
        return OpenDistractorKB(str(Path(self.run_dir) / "distractor_kb"))

    def __call__(self, kb: Any = None, llms: Mapping[str, Any] | None = None) -> RagShaperComponents:
        """The components; ``kb`` (the main KB K) and ``llms`` (objects a Python caller passed, by
        role) replace what the references would resolve to."""
        from agentrag.synth.worker import resolve_role_llms

        main_kb = kb
        if main_kb is None:
            from agentrag.kb import KnowledgeBase

            main_kb = KnowledgeBase.load(self.kb)
        given = llms or {}
        refs = {role: ref for role, ref in role_refs(self.llm, self.teacher, self.tagger).items()
                if given.get(role) is None}
        resolved = {**resolve_role_llms(refs, self.run_dir), **{k: v for k, v in given.items() if v is not None}}
        return RagShaperComponents(curator=resolved["curator"], teacher=resolved["teacher"], main_kb=main_kb,
                                   tagger=resolved.get("tagger"),
                                   distractor_kb=distractor_kb_factory(main_kb, Path(self.run_dir) / "distractor_kb"),
                                   rebuild=self, open_distractor_kb=self.open_distractor_kb())


__all__ = ["RagShaperRecipe", "OpenDistractorKB", "distractor_kb_factory", "role_refs"]
