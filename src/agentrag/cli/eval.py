"""``agentrag eval``: run an agent over a QA dataset and score it (EM/F1/acc, judge, hop diagnosis)."""

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
    styled,
    user_errors,
)
from agentrag.cli.progress import progress_output
from agentrag.cli.runconfig import print_config, run_dir_for
from agentrag.errors import UserError


def eval_command(
    out: OutOpt = None,
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="QA file (required): FlashRAG jsonl or "
                                                "raw HotpotQA / 2WikiMultihopQA / MuSiQue (format detected).")] = None,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge-base directory or http://host:port "
                                           "of a Search-R1-style retrieval server (required).")] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="react | plan_step | reason_ground | "
                                              "search_r1 | planner_executor, or a baseline: naive | standard_rag | "
                                              "ircot | iter_retgen. Default: react.")] = None,
    suite: Annotated[Path | None, typer.Option("--suite", help="A suite file (YAML: agents x datasets, one kb "
                                               "and llm, a reference row): run every cell into --out and print the "
                                               "papers' results table (suite.md) with paired bootstrap intervals "
                                               "against the reference. --kb/--llm/--judge/--limit/--concurrency "
                                               "override the file's values. See docs/eval.md. Default: none (one agent, one "
                                               "dataset).")] = None,
    llm: Annotated[str | None, typer.Option("--llm", "-m", help="Agent LLM: embedded | openai:MODEL | "
                                            "openai:MODEL@URL | hf:CHECKPOINT_DIR (e.g. the output of agentrag "
                                            "train) | YAML file. Default: embedded.")] = None,
    executor_llm: Annotated[str | None, typer.Option("--executor-llm", help="planner_executor only: the "
                                                     "executor's LLM (same forms as --llm; default: --llm). Same as "
                                                     "--set agent_config.executor_llm=REF.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Judge LLM (same forms as --llm). Default: none, "
                                              "the LLM judge is skipped (in eval the judge is an extra metric you "
                                              "opt into; the synthesizers' judges default to --llm).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Evaluate only the first N questions. "
                                              "Default: all.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", "-j", help="Questions in flight, and the most "
                                                    "requests that reach an LLM endpoint. Default: 64 with an openai: LLM, 2 with "
                                                    "the embedded model.")] = None,
    maxd: Annotated[bool | None, typer.Option("--maxd/--no-maxd", help="Also run the lower-hop questions "
                                              "(MuSiQue decompositions, Tracer data) to measure MaxD.")] = None,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    show_config: PrintConfigOpt = False,
    force_new_config: ForceNewConfigOpt = False,
) -> None:
    """Evaluate an agent on a QA dataset and write a run directory.

    Writes OUT/results.jsonl (one scored trajectory per question), OUT/metrics.json (EM, F1, acc,
    LLM judge, gold-passage recall, hop-aware diagnosis) and OUT/report.md + OUT/report.html.

    Rerunning the same command resumes: finished questions are skipped and cached LLM calls are
    not paid again. Exit codes: 0 all scored; 3 items left unfinished by an outage (rerun to
    finish them); 2 bad input or configuration (a 401/403/404 from an endpoint, an unwritable
    --out, a run directory another process is writing); 1 a bug (tracebacks in the log). With --executor ray the questions run on Ray worker processes, each building
    its own LLM, retriever and agent from this config; this process still writes every result.

    Example: agentrag eval --dataset ../shared/data/hotpotqa/dev_distractor_200.jsonl --kb runs/kb
    --agent react --llm embedded --limit 10 -j 1 --out runs/eval_react --set agent_config.max_steps=4
    (the settings a 2-core CPU finishes in minutes; scripts/demo.sh uses them). With --llm embedded,
    agent_config max_steps 4, top_k 3 and max_top_k 3 are the defaults unless set (planner_executor
    keeps its max_steps 6 and top_k 5: EviPath's training paths fit them).
    """
    with user_errors():
        from agentrag.eval.defaults import resolved_eval_config
        from agentrag.eval.run import EvalBugs, run_eval
        from agentrag.eval.runner import EvalConfig

        if suite is not None:
            given = {"--dataset": dataset, "--agent": agent, "--executor-llm": executor_llm, "--maxd": maxd,
                     "--config": config, "--workers": workers, "--ray-address": ray_address}
            clash = [k for k, v in given.items() if v is not None] + (
                ["--executor"] if executor not in (None, "thread") else [])
            if clash:
                raise UserError(f"--suite runs the agents and datasets of {suite}; {', '.join(clash)} cannot be "
                                "combined with it (put agents and datasets in the suite file; cells run on threads)")
            _run_suite(suite, need_out(out), sets, show_config,
                       {"kb": kb, "llm": llm, "judge": judge, "limit": limit, "concurrency": concurrency})
            return
        if executor_llm:
            sets = [*(sets or []), f"agent_config.executor_llm={executor_llm}"]
        cfg = resolve_config(EvalConfig, config, sets, base={
            "dataset": dataset, "kb": kb, "agent": agent, "llm": llm, "judge": judge, "limit": limit,
            "concurrency": concurrency, "maxd": maxd})
        cfg = resolved_eval_config(cfg)
        if show_config:
            print_config(cfg)
        out = run_dir_for(need_out(out), cfg, force_new=force_new_config, normalize=resolved_eval_config)
        with executor_from_options(executor, workers, ray_address, cfg.items_in_flight()) as ex, \
                progress_output() as bar:
            try:
                metrics = run_eval(cfg, out, executor=ex, progress=bar, preflight=True)
            except EvalBugs as exc:
                if exc.metrics is not None:
                    _print_metrics(exc.metrics)
                raise
        _print_metrics(metrics)
        console.print(f"results: {out / 'results.jsonl'}\nreport:  {out / 'report.html'}  (markdown: "
                      f"{out / 'report.md'})")
        if metrics.get("unfinished"):
            kinds = ", ".join(f"{k}: {v}" for k, v in metrics["unfinished_reasons"].items())
            console.print(styled((f"{metrics['unfinished']} items unfinished ({kinds}); they are not scored. "
                                  "Rerun the same command to finish them.", "yellow")))
    exit_if_unfinished(metrics.get("unfinished", 0))


def _run_suite(path: Path, out: Path, sets: list[str] | None, show_config: bool, flags: dict[str, Any]) -> None:
    """``agentrag eval --suite FILE``: the suite's cells into ``out``, then the table."""
    from agentrag.eval.defaults import resolved_eval_config
    from agentrag.eval.run import EvalBugs
    from agentrag.eval.runner import EvalConfig
    from agentrag.eval.suite import SuiteConfig, load_suite, run_suite, suite_markdown

    cfg = load_suite(path, sets or [])
    data = cfg.model_dump(mode="json")
    data.update({k: v for k, v in flags.items() if v is not None})  # flags win over the file
    for row in data["agents"]:  # each row's settings resolved as `agentrag eval` resolves them
        resolved = resolved_eval_config(EvalConfig(agent=row["agent"], agent_config=row["agent_config"],
                                                   llm=data["llm"]))
        row["agent_config"] = resolved.agent_config
    cfg = SuiteConfig.model_validate(data)
    if show_config:
        print_config(cfg)
    with progress_output() as bar:
        try:
            table = run_suite(cfg, out, progress=bar)
        except EvalBugs as exc:
            if exc.metrics is not None:
                console.print(suite_markdown(exc.metrics), markup=False, highlight=False)
            raise
    console.print(suite_markdown(table), markup=False, highlight=False)
    console.print(f"table: {out / 'suite.md'}  (cells: {out / 'runs'}; browse: agentrag view {out})")
    exit_if_unfinished(table.get("unfinished", 0))


def _print_metrics(m: dict[str, Any]) -> None:
    def pct(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.1f}"

    console.print(f"n={m['n']}  EM={pct(m['em'])}  F1={pct(m['f1'])}  Acc={pct(m['acc'])}  "
                  f"judge-pass={pct(m['judge_pass'])}  recall={pct(m['recall'])}  "
                  f"steps={m['mean_steps'] if m['mean_steps'] is not None else '–'}")
    h = m.get("hops", {})
    console.print(f"Steps-C={h.get('steps_c')}  Steps-I={h.get('steps_i')}  collapse={pct(h.get('collapse_rate'))}%  "
                  f"over-extension={pct(h.get('over_extension_rate'))}%  MaxD(3-4 hop)={h.get('maxd')}  "
                  f"top-k/step C={h.get('topk_c')} I={h.get('topk_i')}  unfinished={m.get('unfinished', 0)}  "
                  f"judge errors={m.get('judge_errors', 0)}  context_limit={m.get('context_limit', 0)}")
    for name, row in (h.get("table2") or {}).items():
        console.print(f"  {name}: n={row['n']}  MaxD={row['maxd']}  Steps-C={row['steps_c']}  Steps-I={row['steps_i']}")


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
