"""``agentrag synth evipath``: abductive reasoning paths -> planner and executor SFT data."""

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


def evipath(
    out: OutOpt = None,
    dataset: Annotated[list[str] | None, typer.Option("--dataset", "-d", help="Raw HotpotQA / 2WikiMultihopQA / "
                                                      "MuSiQue file with gold evidence (repeatable; "
                                                      "required).")] = None,
    llm: Annotated[str | None, typer.Option("--llm", "-m", help="Planner LLM (and executor unless --executor-llm): "
                                            "embedded | openai:MODEL | openai:MODEL@URL | YAML. Default: "
                                            "embedded.")] = None,
    executor_llm: Annotated[str | None, typer.Option("--executor-llm", help="Executor LLM (default: --llm).")] = None,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge base: needed by --mode deductive; its embedder "
                                           "is φ of Eq. 6 unless executor.embedder is set. Default: none.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="First N items of each dataset. Default: "
                                              "all.")] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="abductive (gold answer + evidence, the paper's "
                                             "method) | deductive (the agent on the KB, RQ7 baseline). Default: "
                                             "abductive.")] = None,
    split: Annotated[str | None, typer.Option("--split", help="Export planner | executor | both "
                                              "conversations. Default: both.")] = None,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Skip (and count) items without gold "
                                               "evidence instead of failing.")] = False,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    show_config: PrintConfigOpt = False,
    force_new_config: ForceNewConfigOpt = False,
) -> None:
    """Run EviPath: Eq. 3 plans -> Eq. 4-5 iterations with Eq. 6 sub-answers -> evidence selections
    and executor thoughts -> quality gates -> Eq. 7 conversations -> SFT export + report.

    Writes OUT/{items,plans,iterations,sub_answers,selections,gates,conversations}.jsonl, OUT/sft/
    (TRL conversational + LLaMA-Factory sharegpt with dataset_info.json and a dataset card),
    OUT/metrics.json and OUT/report.md. Rerunning the same command resumes; LLM calls are cached in
    OUT/llm_cache.sqlite. With --executor ray, paths and selections run on Ray worker processes
    that rebuild the LLMs, KB and φ from this config; this process writes every record.

    Exit codes: 0 every item finished; 3 items left unfinished by an outage (rerun to finish them);
    2 bad input or configuration (a 401/404 from the LLM included: nothing is written as finished);
    1 a bug (tracebacks in the log; metrics and report are still written).

    Items in flight: e.g. --set concurrency=32 (also the most requests that reach an LLM endpoint;
    default 64 with an openai: LLM, 2 with embedded; docs/llm.md).

    Example: agentrag synth evipath --dataset ../shared/data/musique/train_100.jsonl --llm embedded
    --limit 2 --out runs/evipath
    """
    with user_errors():
        from agentrag.synth.evipath import EviPathRunConfig

        base: dict[str, Any] = {"datasets": dataset, "llm": llm, "executor_llm": executor_llm, "kb": kb,
                                "limit": limit, "mode": mode, "split": split,
                                "skip_invalid": True if skip_invalid else None}
        cfg = resolve_config(EviPathRunConfig, config, sets, base=base)
        if show_config:
            print_config(cfg)
        out = run_dir_for(need_out(out), cfg, force_new=force_new_config)
        metrics = _with_progress(cfg, out, executor, workers, ray_address)
        _summary(metrics, out)
    exit_if_unfinished(metrics["unfinished"])


def _with_progress(cfg: Any, out: Path, executor: str | None, workers: int | None,
                   ray_address: str | None) -> dict[str, Any]:
    from agentrag.synth.evipath import run_evipath

    with executor_from_options(executor, workers, ray_address, cfg.items_in_flight()) as ex, progress_output() as progress:
        return run_evipath(cfg, out, progress=progress, executor=ex, preflight=True)


def _summary(metrics: dict[str, Any], path: Path) -> None:
    from agentrag.cli.funnel import print_empty_funnel, print_funnel, print_outputs

    print_funnel(metrics["funnel"])
    console.print(f"  LLM per finished item: {metrics['llm_per_item']}  wall time: {metrics['wall_s']} s")
    for name, st in metrics.get("llm", {}).items():
        console.print(f"  LLM {name}: {st}")

    if not print_empty_funnel(metrics, path):
        console.print(f"export: {metrics['export']}")
    print_outputs([("sft", path / "sft" / "trl_sft.jsonl"), ("report", path / "report.md"),
                   ("metrics", path / "metrics.json")])


def register(synth_app: typer.Typer) -> None:
    synth_app.command("evipath")(evipath)


__all__ = ["register"]
