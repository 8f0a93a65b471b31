"""``agentrag eval``: run an agent over a QA dataset and score it (EM/F1/acc, judge, hop diagnosis)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from agentrag.cli.common import (
    ConfigOpt,
    ExecutorOpt,
    OutOpt,
    RayAddressOpt,
    SetOpt,
    WorkersOpt,
    console,
    err_console,
    executor_from_options,
    is_tty,
    resolve_config,
    styled,
    user_errors,
)


def eval_command(
    out: OutOpt,
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="QA file: FlashRAG jsonl or raw "
                                                "HotpotQA / 2WikiMultihopQA / MuSiQue (format detected).")] = None,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge-base directory or http://host:port "
                                           "of a Search-R1-style retrieval server.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="react | plan_step | reason_ground | "
                                              "search_r1 | planner_executor.")] = None,
    llm: Annotated[str | None, typer.Option("--llm", help="Agent LLM: embedded | openai:MODEL | "
                                            "openai:MODEL@URL | YAML file.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Judge LLM reference (same forms as --llm); "
                                              "omit to skip the LLM judge.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Evaluate only the first N questions.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", "-j", help="Questions in flight.")] = None,
    maxd: Annotated[bool | None, typer.Option("--maxd/--no-maxd", help="Also run the lower-hop questions "
                                              "(MuSiQue decompositions, Tracer data) to measure MaxD.")] = None,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
) -> None:
    """Evaluate an agent on a QA dataset and write a run directory.

    Writes OUT/results.jsonl (one scored trajectory per question), OUT/metrics.json (EM, F1, acc,
    LLM judge, gold-passage recall, hop-aware diagnosis) and OUT/report.md + OUT/report.html.

    Rerunning the same command resumes: finished questions are skipped and cached LLM calls are
    not paid again. With --executor ray the questions run on Ray worker processes, each building
    its own LLM, retriever and agent from this config; this process still writes every result.

    Example: agentrag eval --dataset ../shared/data/hotpotqa/dev_distractor_200.jsonl --kb runs/kb
    --agent react --llm embedded --limit 10 --out runs/eval_react
    """
    with user_errors():
        from agentrag.errors import UserError
        from agentrag.eval.datasets import load_dataset
        from agentrag.eval.judge import LLMJudge
        from agentrag.eval.runner import EvalConfig, evaluate, summarize
        from agentrag.report.eval_report import write_eval_report
        from agentrag.runs import RunDir

        cfg = resolve_config(EvalConfig, config, sets, base={
            "dataset": dataset, "kb": kb, "agent": agent, "llm": llm, "judge": judge, "limit": limit,
            "concurrency": concurrency, "maxd": maxd})
        if not cfg.dataset:
            raise UserError("no dataset: pass --dataset FILE (or set 'dataset' in the --config file)")
        if not cfg.kb:
            raise UserError("no knowledge base: pass --kb DIR or --kb http://host:port")
        # llama.cpp's OpenMP threads must wait passively on a shared CPU; set it before the KB's
        # embedder (torch/onnxruntime) can start an OpenMP runtime (an explicit user value wins).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from agentrag.agents import agent_config, build_agent
        from agentrag.kb import resolve_retriever
        from agentrag.llm import resolve_llm
        from agentrag.llm.resolve import check_llm_ref
        from agentrag.paths import check_out_dir

        # every input is checked before the run directory is written
        check_out_dir(out)
        items = load_dataset(cfg.dataset, cfg.fmt, limit=cfg.limit)
        for ref in (cfg.llm, cfg.judge):
            if ref:
                check_llm_ref(ref)
        agent_config(cfg.agent, **cfg.agent_config)
        retriever = resolve_retriever(cfg.kb)
        check = getattr(retriever, "health", None)
        if callable(check):  # a retrieval server: fail now, not item by item
            check()
        run = RunDir(out)
        run.write_config(cfg)
        cache = run.file("llm_cache.sqlite")
        the_judge: Any = None
        the_agent: Any
        if (executor or "thread") == "thread":
            agent_llm = resolve_llm(cfg.llm, cache=cache)
            the_judge = LLMJudge(resolve_llm(cfg.judge, cache=cache)) if cfg.judge else None
            the_agent = build_agent(cfg.agent, agent_llm, retriever, **cfg.agent_config)
        else:  # each worker process builds LLM, retriever, agent and judge from the config
            from agentrag.eval.worker import EvalTask

            the_agent = EvalTask(cfg.model_dump(), cache)

        started = time.perf_counter()
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with executor_from_options(executor, workers, ray_address, cfg.concurrency) as ex, \
                Progress(TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                         console=err_console, disable=not is_tty()) as bar:
            task = bar.add_task("eval", total=None)
            results = evaluate(the_agent, items, run, judge=the_judge, concurrency=cfg.concurrency,
                               maxd=cfg.maxd, correct_by=cfg.correct_by, executor=ex,
                               on_start=lambda done, total: bar.update(task, completed=done, total=total),
                               on_result=lambda _r: bar.advance(task))
        unfinished = json.loads(run.file("unfinished.json").read_text(encoding="utf-8"))
        metrics = summarize(results, n_requested=len(items), unfinished=unfinished)
        metrics["invocation_wall_s"] = round(time.perf_counter() - started, 2)  # this invocation only
        run.write_json("metrics.json", metrics)
        md, html = write_eval_report(
            run.path, metrics, title=f"Evaluation of {cfg.agent} on {Path(cfg.dataset).name}",
            description=f"agent {cfg.agent}, LLM {cfg.llm}, judge {cfg.judge or 'none'}, KB {cfg.kb}")
        _print_metrics(metrics)
        console.print(f"results: {run.file('results.jsonl')}\nreport:  {html}  (markdown: {md})")
        if metrics.get("unfinished"):
            kinds = ", ".join(f"{k}: {v}" for k, v in metrics["unfinished_reasons"].items())
            console.print(styled((f"{metrics['unfinished']} items unfinished ({kinds}); they are not scored. "
                                  "Rerun the same command to finish them.", "yellow")))


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
                  f"judge errors={m.get('judge_errors', 0)}")
    for name, row in (h.get("table2") or {}).items():
        console.print(f"  {name}: n={row['n']}  MaxD={row['maxd']}  Steps-C={row['steps_c']}  Steps-I={row['steps_i']}")


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
