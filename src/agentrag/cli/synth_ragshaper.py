"""``agentrag synth ragshaper``: InfoCurator trees, distractors, QA and teacher trajectories -> SFT data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from agentrag.cli.common import (
    ConfigOpt,
    ExecutorOpt,
    ForceNewConfigOpt,
    OutOpt,
    PrintConfigOpt,
    RayAddressOpt,
    SetOpt,
    WorkersOpt,
    console,
    executor_from_options,
    exit_if_unfinished,
    need_out,
    resolve_config,
    user_errors,
)
from agentrag.cli.progress import progress_output
from agentrag.cli.runconfig import print_config, run_dir_for


def ragshaper(
    out: OutOpt = None,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge-base directory K (agentrag kb build; "
                                           "required).")] = None,
    seeds: Annotated[str | None, typer.Option("--seeds", help="File of seed entities (one per line, or JSONL "
                                              "with 'entity'/'title'), or a number N to sample N KB titles "
                                              "(required).")] = None,
    llm: Annotated[str | None, typer.Option("--llm", "-m", help="Curator LLM (also writes distractors and QA): "
                                            "embedded | openai:MODEL | openai:MODEL@URL | YAML. Default: "
                                            "embedded.")] = None,
    teacher: Annotated[str | None, typer.Option("--teacher", help="Teacher LLM for behavior elicitation "
                                                "(default: --llm).")] = None,
    preset: Annotated[str, typer.Option("--preset", help="Starting settings: 'paper' (the paper's §4.1 values: "
                                        "depth 30, tau 0.8, m 2, p_e 0.5, 50 teacher turns) or 'demo' (small "
                                        "sizes for a laptop CPU). --config and --set apply on top.")] = "demo",
    no_distractors: Annotated[bool, typer.Option("--no-distractors", help="Ablation RAGShaper-Dis: no "
                                                 "distractor tool and no K~ in navigation.")] = False,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    show_config: PrintConfigOpt = False,
    force_new_config: ForceNewConfigOpt = False,
) -> None:
    """Run RAGShaper: InfoCurator trees with distractors -> Eq. 5 paths -> QA -> teacher
    trajectories under constrained navigation -> F1 > 0.9 filter -> SFT export + report.

    Writes OUT/{seeds,trees,distractors,paths,qa,trajectories,filter,tags}.jsonl, OUT/distractor_kb
    (K~), OUT/sft/ (TRL conversational + LLaMA-Factory sharegpt with dataset_info.json),
    OUT/metrics.json and OUT/report.md (funnel, tool calls, distractor types, behaviour tags).
    Rerunning the same command resumes; LLM calls are cached in OUT/llm_cache.sqlite.

    Exit codes: 0 every item finished; 3 items left unfinished by an outage (LLM or retrieval
    unreachable after retries, a reply that is not a valid completion) or a lost Ray worker:
    nothing is written for them, rerun the same command to finish them; 2 bad input or
    configuration (a 401/403/404 from an endpoint, an unknown model: the run stops at once and
    writes nothing as finished); 1 an item hit a bug (traceback in the log; it stays
    unfinished). Model output that fails parsing or validation, or a request over the model's
    context window, is a flagged record (a rejection with its reason), not a failure. With
    --executor ray, seeds, paths, questions and trajectories run on Ray worker processes that
    rebuild the LLMs and load K from this config; this process writes every record.

    Items in flight: e.g. --set concurrency=32 (also the most requests that reach an LLM endpoint;
    default 64 with an openai: LLM, 2 with embedded; docs/llm.md).

    Example: agentrag synth ragshaper --kb runs/kb --seeds 2 --llm embedded --out runs/ragshaper
    --set curator.max_depth=3   (or --preset paper for the paper's settings)
    """
    with user_errors():
        from agentrag.synth.ragshaper.config import RagShaperRunConfig, preset_base
        from agentrag.synth.ragshaper.run import run_ragshaper

        base: dict[str, Any] = {"kb": kb, "seeds": seeds, "llm": llm, "teacher": teacher}
        if no_distractors:
            base["distractors"] = {"enabled": False}
        cfg = resolve_config(RagShaperRunConfig, config, sets, base=preset_base(preset, base))
        if show_config:
            print_config(cfg)
        out = run_dir_for(need_out(out), cfg, force_new=force_new_config)
        with executor_from_options(executor, workers, ray_address, cfg.items_in_flight()) as ex, \
                progress_output() as progress:
            metrics = run_ragshaper(cfg, out, progress=progress, executor=ex, preflight=True)
        _summary(metrics, out)
    exit_if_unfinished(int(metrics["unfinished"]))


def _summary(metrics: dict[str, Any], path: Path) -> None:
    """The funnel and the LLM usage of the driver's typed metrics (``metrics.json``)."""
    from agentrag.cli.funnel import print_empty_funnel, print_funnel, print_outputs

    print_funnel(metrics["funnel"])
    for name, st in metrics.get("llm", {}).items():
        console.print(f"  LLM {name}: {st}")
    print_empty_funnel(metrics, path)
    print_outputs([("sft", path / "sft" / "trl_sft.jsonl"), ("report", path / "report.md"),
                   ("metrics", path / "metrics.json")])


def register(synth_app: typer.Typer) -> None:
    synth_app.command("ragshaper")(ragshaper)


__all__ = ["register"]
