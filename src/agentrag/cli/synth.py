"""``agentrag synth``: training-data synthesizers (``ragshaper`` so far)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from agentrag.cli.common import ConfigOpt, OutOpt, SetOpt, console, err_console, resolve_config, user_errors

synth_app = typer.Typer(help="Synthesize agentic-RAG training data (tasks, trajectories, SFT exports); "
                        "one command per synthesizer, listed below.", no_args_is_help=True)


def _distractor_kb_factory(main_kb: Any, directory: Path) -> Any:
    """Builds K~ (rebuilt from distractors.jsonl on every run, so resume never duplicates it)."""

    def build(passages: list[Any]) -> Any:
        from agentrag.kb import KnowledgeBase

        config = main_kb.config.model_copy(update={"name": "distractor", "method": "dense"})
        return KnowledgeBase.build(passages, directory, config, embedder=main_kb.embedder, overwrite=True,
                                   progress=False)

    return build


@synth_app.command("ragshaper")
def ragshaper(
    out: OutOpt,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge-base directory K (agentrag kb build).")] = None,
    seeds: Annotated[str | None, typer.Option("--seeds", help="File of seed entities (one per line, or JSONL "
                                              "with 'entity'/'title'), or a number N to sample N KB titles.")] = None,
    llm: Annotated[str | None, typer.Option("--llm", help="Curator LLM (also writes distractors and QA): "
                                            "embedded | openai:MODEL | openai:MODEL@URL | YAML.")] = None,
    teacher: Annotated[str | None, typer.Option("--teacher", help="Teacher LLM for behavior elicitation "
                                                "(default: --llm).")] = None,
    no_distractors: Annotated[bool, typer.Option("--no-distractors", help="Ablation RAGShaper-Dis: no "
                                                 "distractor tool and no K~ in navigation.")] = False,
    config: ConfigOpt = None,
    sets: SetOpt = None,
) -> None:
    """Run RAGShaper: InfoCurator trees with distractors -> Eq. 5 paths -> QA -> teacher
    trajectories under constrained navigation -> F1 > 0.9 filter -> SFT export + report.

    Writes OUT/{seeds,trees,distractors,paths,qa,trajectories,filter,tags}.jsonl, OUT/distractor_kb
    (K~), OUT/sft/ (TRL conversational + LLaMA-Factory sharegpt with dataset_info.json),
    OUT/metrics.json and OUT/report.md (funnel, tool calls, distractor types, behaviour tags).
    Rerunning the same command resumes; LLM calls are cached in OUT/llm_cache.sqlite.

    Example: agentrag synth ragshaper --kb runs/kb --seeds 2 --llm embedded --out runs/ragshaper
    --set curator.max_depth=3
    """
    with user_errors():
        from agentrag.errors import UserError
        from agentrag.kb import KnowledgeBase
        from agentrag.llm import resolve_llm
        from agentrag.runs import RunDir
        from agentrag.synth.ragshaper.config import RagShaperRunConfig
        from agentrag.synth.ragshaper.pipeline import RagShaperComponents, RagShaperPipeline, read_seeds

        base: dict[str, Any] = {"kb": kb, "seeds": seeds, "llm": llm, "teacher": teacher}
        if no_distractors:
            base["distractors"] = {"enabled": False}
        cfg = resolve_config(RagShaperRunConfig, config, sets, base=base)
        if not cfg.kb:
            raise UserError("no knowledge base: pass --kb DIR (build one with `agentrag kb build`)")
        if not cfg.seeds:
            raise UserError("no seeds: pass --seeds FILE (one entity a line) or --seeds N (sample N KB titles)")
        main_kb = KnowledgeBase.load(cfg.kb)
        sampled = cfg.seeds.strip().isdigit()
        entities = main_kb.sample_titles(int(cfg.seeds), seed=cfg.seed) if sampled else read_seeds(cfg.seeds)
        source = f"kb.sample_titles({cfg.seeds}, seed={cfg.seed})" if sampled else str(cfg.seeds)
        run = RunDir(out)
        run.write_config(cfg)
        cache = run.file("llm_cache.sqlite")
        curator = resolve_llm(cfg.llm, cache=cache)
        teacher_llm = curator if (cfg.teacher or cfg.llm) == cfg.llm else resolve_llm(cfg.teacher or cfg.llm,
                                                                                    cache=cache)
        tagger = curator if (cfg.tagger or cfg.llm) == cfg.llm else resolve_llm(cfg.tagger or cfg.llm, cache=cache)
        comps = RagShaperComponents(curator=curator, teacher=teacher_llm, main_kb=main_kb, tagger=tagger,
                           distractor_kb=_distractor_kb_factory(main_kb, run.path / "distractor_kb"))
        metrics = _run_with_progress(RagShaperPipeline, run, cfg, comps, entities, source)
        roles: dict[int, tuple[list[str], Any]] = {}
        for role, obj in (("curator", curator), ("teacher", teacher_llm), ("tagger", tagger)):
            roles.setdefault(id(obj), ([], obj))[0].append(role)
        metrics["llm_calls"] = {"+".join(names): obj.stats() for names, obj in roles.values()
                                if hasattr(obj, "stats")}
        run.write_json("metrics.json", metrics)
        _summary(metrics, run.path)


def _run_with_progress(pipeline_cls: Any, run: Any, cfg: Any, comps: Any, entities: list[str],
                       source: str) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=False) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        metrics: dict[str, Any] = pipeline_cls(run, cfg, comps, progress=progress, seed_source=source).run(entities)
    return metrics


def _summary(metrics: dict[str, Any], path: Path) -> None:
    for row in metrics["funnel"]:
        rej = ", ".join(f"{k}: {v}" for k, v in row["rejected"].items())
        console.print(f"  {row['stage']:<40} {row['in']:>5} -> {row['out']:<5} {rej}")
    for name, st in metrics.get("llm_calls", {}).items():
        console.print(f"  LLM {name}: {st}")
    console.print(f"report: {path / 'report.md'}   metrics: {path / 'metrics.json'}")


def register(app: typer.Typer) -> None:
    app.add_typer(synth_app, name="synth")
