"""``agentrag synth tracer``: build a verified hop-aware benchmark (AgenticRAGTracer); ``review``."""

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
    alias,
    console,
    err_console,
    executor_from_options,
    exit_if_unfinished,
    need_out,
    pick,
    resolve_config,
    user_errors,
)
from agentrag.cli.progress import progress_output
from agentrag.cli.runconfig import print_config, run_dir_for

tracer_app = typer.Typer(help="AgenticRAGTracer builder: verified 2-4 hop benchmarks from atomic questions "
                         "(run with --kb/--out to build; `review` for the human-review sheet).")


@tracer_app.callback(invoke_without_command=True)
def build(
    ctx: typer.Context,
    out: OutOpt = None,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge-base directory to sample documents from "
                                           "(required).")] = None,
    llm: Annotated[str | None, typer.Option("--llm", "-m", help="Generator / answerer / auditor LLM: embedded | "
                                            "openai:MODEL | openai:MODEL@URL | YAML. Default: embedded.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="0/1/2 judge LLM (same forms as --llm). Default: "
                                              "--llm.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="N documents sampled from the KB (config "
                                              "key 'docs'). Default: 10.")] = None,
    docs: Annotated[int | None, alias("--docs", of="--limit")] = None,
    max_hops: Annotated[int | None, typer.Option("--max-hops", help="Longest chain (2-4; paper: 4). Default: "
                                                 "4.")] = None,
    max_per_type: Annotated[int | None, typer.Option("--max-per-type", help="At most this many documents per "
                                                     "annotated domain. Default: no cap (sampling.max_per_type)."
                                                     )] = None,
    exclude: Annotated[list[Path] | None, typer.Option("--exclude", help="Benchmark file whose titles are removed "
                                                       "from sampling and retrieval (repeatable). Default: "
                                                       "none.")] = None,
    preset: Annotated[str, typer.Option("--preset", help="Starting settings: 'default' (small sizes) or 'paper' "
                                        "(the released code's retrieval settings: k=10, 5 QA pairs per "
                                        "document, 15 compositions tried per hop, 4 hops).")] = "default",
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    show_config: PrintConfigOpt = False,
    force_new_config: ForceNewConfigOpt = False,
) -> None:
    """Build a benchmark: sample + annotate documents -> atomic QA with filters -> 2-hop inference /
    comparison questions -> three-stage verification -> extension to 3 and 4 hops.

    Writes OUT/{docs,atomic,hop2,hop3,hop4}.jsonl (every verdict with its raw output),
    OUT/chains.jsonl (per-hop records), OUT/benchmark.jsonl and OUT/benchmark_<L>hop.jsonl (FlashRAG QA
    with lower_hop_questions: `agentrag eval --dataset OUT/benchmark.jsonl --maxd`), OUT/metrics.json and
    OUT/report.md|html. LLM calls are cached in OUT/llm_cache.sqlite; rerunning resumes. With --executor
    ray, annotation, atomic QA and hop extension run on Ray worker processes that rebuild the LLMs
    and load the KB from this config; this process writes every record.

    Exit codes: 0 every item finished; 3 items left unfinished by an outage (rerun the same command
    to finish them); 2 bad input or configuration (a 401/404 from the LLM included: nothing is
    written as finished); 1 an item hit a bug (traceback in the log).

    Items in flight: e.g. --set concurrency=32 (also the most requests that reach an LLM endpoint;
    default 64 with an openai: LLM, 2 with embedded; docs/llm.md).

    Example: agentrag synth tracer --kb runs/kb --llm embedded --limit 4 --max-hops 2 --out runs/tracer
    """
    if ctx.invoked_subcommand is not None:
        return
    if out is None and kb is None and not show_config:
        console.print(ctx.get_help())
        raise typer.Exit(0)
    with user_errors():
        from agentrag.synth.tracer.config import TracerRunConfig, preset_base
        from agentrag.synth.tracer.run import run_tracer

        base: dict[str, Any] = {"kb": kb, "llm": llm, "judge": judge, "docs": pick(limit, docs, "--limit", "--docs"), "max_hops": max_hops,
                                "exclude": [str(e) for e in exclude] if exclude else None}
        if max_per_type is not None:
            base["sampling"] = {"max_per_type": max_per_type}
        cfg = resolve_config(TracerRunConfig, config, sets, base=preset_base(preset, base))
        if show_config:
            print_config(cfg)
        out = run_dir_for(need_out(out), cfg, force_new=force_new_config)
        with executor_from_options(executor, workers, ray_address, cfg.items_in_flight()) as ex, \
                progress_output() as progress:
            metrics = run_tracer(cfg, out, progress=progress, executor=ex, preflight=True)
        from agentrag.cli.funnel import print_empty_funnel, print_funnel, print_outputs

        print_funnel(metrics["funnel"])

        if not print_empty_funnel(metrics, out):
            console.print(f"  exported: {metrics['export']['files']}", markup=False)
        print_outputs([("report", out / "report.md"), ("benchmark", out / "benchmark.jsonl")])
        exit_if_unfinished(metrics["unfinished"])


@tracer_app.command("review")
def review(
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The run directory of a tracer build "
                                             "(required; the sheet is written to OUT/review/).")] = None,
    run_alias: Annotated[Path | None, alias("--run", "-r", of="--out")] = None,
    labels: Annotated[list[Path] | None, typer.Option("--labels", "-l", help="An annotator's file: the "
                                                      "labels-<name>.csv the sheet's Save button downloads, or a "
                                                      "filled sheet.csv (repeat for up to three). Default: none (write the "
                                                      "sheet).")] = None,
) -> None:
    """Human review (§3.4). Without --labels: write OUT/review/sheet.csv and sheet.html. Each rater opens
    sheet.html in a browser (each item: the chain hop by hop, every verdict, the full documents), picks
    Retain/Discard, may comment, and presses Save, which downloads labels-<name>.csv. With --labels:
    majority decision per item, the disagreements, Fleiss' kappa and every vote and comment into
    OUT/review/decisions.json, and OUT/benchmark_reviewed.jsonl with the retained items.

    Example: agentrag synth tracer review --out runs/tracer --labels a.csv --labels b.csv --labels c.csv
    """
    with user_errors():
        from agentrag.synth.tracer.review import apply_review, write_review_sheet

        run = need_out(pick(out, run_alias, "--out", "--run"))

        if not labels:
            csv_path, html_path = write_review_sheet(run)
            console.print(f"review sheet: {csv_path}  {html_path}")
            return
        result = apply_review(run, labels)
        console.print(f"items: {result['items']}  retained: {len(result['retained'])}  "
                      f"disagreements: {len(result['disagreements'])}  Fleiss' kappa: {result['fleiss_kappa']}  "
                      f"comments: {result['comments']}", markup=False)
        for d in result["disagreements"]:
            err_console.print(f"  disagreement {d['id']}: {d['votes']} -> {d['decision']}")


def register(synth_app: typer.Typer) -> None:
    synth_app.add_typer(tracer_app, name="tracer")
