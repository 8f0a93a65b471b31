"""``agentrag synth annotated``: human annotations (MuSiQue decompositions, 2Wiki evidence triples)
searched in a KB -> react SFT trajectories, with no LLM call."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentrag.cli.common import (
    ConfigOpt,
    ForceNewConfigOpt,
    OutOpt,
    PrintConfigOpt,
    SetOpt,
    console,
    exit_if_unfinished,
    need_out,
    resolve_config,
    user_errors,
)
from agentrag.cli.progress import progress_output
from agentrag.cli.runconfig import print_config, run_dir_for


def annotated(
    out: OutOpt = None,
    dataset: Annotated[list[str] | None, typer.Option("--dataset", "-d", help="Raw MuSiQue / 2WikiMultihopQA "
                                                      "TRAINING file (repeatable; required).")] = None,
    kb: Annotated[str | None, typer.Option("--kb", help="KB built from the training contexts; every hop is "
                                           "searched there (required).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="First N items of each dataset. Default: "
                                              "all.")] = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    show_config: PrintConfigOpt = False,
    force_new_config: ForceNewConfigOpt = False,
) -> None:
    """Turn human annotations into react trajectories: each hop of a MuSiQue decomposition or a 2Wiki
    evidence triple is searched in the KB (the observation is what the KB returns); a path is kept
    when every hop retrieved its supporting paragraph and the gates pass. No LLM is called.

    Writes OUT/paths.jsonl (every item, kept or dropped with its reason), OUT/sft/ (TRL + sharegpt in
    the react agent's chat format), OUT/metrics.json and OUT/report.md. Rerunning resumes.

    Example: agentrag synth annotated --dataset ../shared/data/musique/train_397.jsonl --kb runs/kb_train
    --out runs/annotated
    """
    with user_errors():
        from agentrag.synth.annotated import AnnotatedRunConfig, run_annotated

        base: dict[str, Any] = {"datasets": dataset, "kb": kb, "limit": limit}
        cfg = resolve_config(AnnotatedRunConfig, config, sets, base=base)
        if show_config:
            print_config(cfg)
        out = run_dir_for(need_out(out), cfg, force_new=force_new_config)
        with progress_output() as progress:
            metrics = run_annotated(cfg, out, progress=progress)
        from agentrag.cli.funnel import print_empty_funnel, print_funnel, print_outputs

        print_funnel(metrics["funnel"])
        console.print(f"kept by source: {metrics.get('kept_by_source')}  wall time: {metrics['wall_s']} s")

        print_empty_funnel(metrics, out)
        print_outputs([("sft", out / "sft" / "trl_sft.jsonl"), ("report", out / "report.md")])
    exit_if_unfinished(metrics["unfinished"])


def register(synth_app: typer.Typer) -> None:
    synth_app.command("annotated")(annotated)


__all__ = ["register"]
