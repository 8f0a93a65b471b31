"""``run_ragshaper``: a whole RAGShaper run from its config, the one entry point of the CLI and the
Python API. It checks every input before it writes anything (KB, seeds, LLM references), then
opens the run directory, resolves the LLMs with the run's response cache, builds the components
and runs the pipeline, which writes ``metrics.json`` once (with the LLM call statistics).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.exec import Executor
from agentrag.llm.base import LLM
from agentrag.records import Passage
from agentrag.runs import RunDir, check_out_dir
from agentrag.synth.ragshaper.config import RagShaperRunConfig
from agentrag.synth.ragshaper.pipeline import Progress, RagShaperComponents, RagShaperPipeline, read_seeds


def distractor_kb_factory(main_kb: Any, directory: Path) -> Any:
    """Builds K~ with the main KB's embedder (rebuilt from distractors.jsonl on every run, so
    resume never duplicates it)."""

    def build(passages: list[Passage]) -> Any:
        from agentrag.kb import KnowledgeBase

        config = main_kb.config.model_copy(update={"name": "distractor", "method": "dense"})
        return KnowledgeBase.build(passages, directory, config, embedder=main_kb.embedder, overwrite=True,
                                   progress=False)

    return build


def _llm_refs(cfg: RagShaperRunConfig) -> dict[str, str]:
    return {"curator": cfg.llm, "teacher": cfg.teacher or cfg.llm, "tagger": cfg.tagger or cfg.llm}


def check_inputs(cfg: RagShaperRunConfig, out: str | os.PathLike[str]) -> tuple[Any, list[str], str]:
    """Everything a run needs, checked before anything is written: (main KB, seed entities, source)."""
    from agentrag.kb import KnowledgeBase
    from agentrag.llm.resolve import check_llm_ref

    if not cfg.kb:
        raise UserError("no knowledge base: pass --kb DIR (build one with `agentrag kb build`)")
    if not cfg.seeds:
        raise UserError("no seeds: pass --seeds FILE (one entity a line) or --seeds N (sample N KB titles)")
    check_out_dir(out)
    for ref in dict.fromkeys(_llm_refs(cfg).values()):
        check_llm_ref(ref)
    main_kb = KnowledgeBase.load(cfg.kb)
    if cfg.seeds.strip().isdigit():
        return (main_kb, main_kb.sample_titles(int(cfg.seeds), seed=cfg.seed),
                f"kb.sample_titles({cfg.seeds}, seed={cfg.seed})")
    return main_kb, read_seeds(cfg.seeds), str(cfg.seeds)


def run_ragshaper(cfg: RagShaperRunConfig, out: str | os.PathLike[str], *, progress: Progress | None = None,
                  executor: Executor | None = None) -> dict[str, Any]:
    """Run RAGShaper into the run directory ``out`` (rerun = resume); returns the metrics."""
    from agentrag.llm import resolve_llm

    main_kb, entities, source = check_inputs(cfg, out)
    run = RunDir(out)
    run.write_config(cfg)
    cache = run.file("llm_cache.sqlite")
    refs = _llm_refs(cfg)
    by_ref: dict[str, LLM] = {ref: resolve_llm(ref, cache=cache) for ref in dict.fromkeys(refs.values())}
    llms = {role: by_ref[ref] for role, ref in refs.items()}  # one backend per distinct reference
    comps = RagShaperComponents(curator=llms["curator"], teacher=llms["teacher"], main_kb=main_kb,
                                tagger=llms["tagger"],
                                distractor_kb=distractor_kb_factory(main_kb, run.path / "distractor_kb"))
    from agentrag.synth.ragshaper.build import ComponentsBuilder

    comps.rebuild = ComponentsBuilder.from_config(cfg, run.path)  # how Ray workers rebuild them
    comps.open_distractor_kb = comps.rebuild.open_distractor_kb()
    pipeline = RagShaperPipeline(run, cfg, comps, progress=progress, seed_source=source, executor=executor)
    return pipeline.run(entities)


__all__ = ["run_ragshaper", "check_inputs", "distractor_kb_factory"]
