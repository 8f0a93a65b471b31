"""``agentrag synth reasonrag``: MCTS + SPRE process-level preference pairs (ReasonRAG)."""

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

#: settings a rerun may change on an existing run: the pairs and the export are rebuilt from the
#: stored trees without LLM calls (``pairs.settings.json``), so no row mixes two configurations
REBUILT_KEYS = ("pairs", "value.alpha_label", "export")


def reasonrag(
    out: OutOpt = None,
    dataset: Annotated[list[str] | None, typer.Option("--dataset", "-d", help="QA file (repeatable; required): "
                                                      "FlashRAG jsonl or raw HotpotQA / 2WikiMultihopQA / "
                                                      "MuSiQue.")] = None,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge-base directory or http://host:port of a "
                                           "Search-R1-style retrieval server (required).")] = None,
    llm: Annotated[str | None, typer.Option("--llm", "-m", help="Policy LLM that takes the tree's steps: embedded "
                                            "| openai:MODEL | openai:MODEL@URL | YAML. Default: embedded.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Judge LLM of Eq. 6 for --value judge (same forms "
                                              "as --llm). Default: --llm.")] = None,
    value: Annotated[str | None, typer.Option("--value", help="Node values: spre (rollouts, Eq. 1) or judge "
                                              "(LLM score of the partial trajectory, Eq. 6). Default: spre.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Use the first N questions of each "
                                              "dataset file. Default: all.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", "-j", help="Questions searched at once, and the "
                                                    "most requests that reach an LLM endpoint. Default: 64 with an openai: LLM, 2 "
                                                    "with the embedded model.")] = None,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    show_config: PrintConfigOpt = False,
    force_new_config: ForceNewConfigOpt = False,
) -> None:
    """Run ReasonRAG's data construction: MCTS over the reason_ground agent's steps (Query
    Generation, Evidence Extraction, Answer Generation), valued by SPRE rollouts or an LLM
    judge, -> process-level preference pairs among siblings -> DPO export + statistics report.

    Writes OUT/{questions,events,trees,greedy,pairs}.jsonl, OUT/dpo/ (TRL conversational
    trl_dpo.jsonl + LLaMA-Factory dpo_sharegpt.jsonl / dpo_alpaca.jsonl, dataset_info.json, dataset card),
    OUT/metrics.json and OUT/report.md (funnel, LLM usage, Table 1 / Figure 2 statistics, best leaf
    vs greedy agent).
    Rerunning the same command resumes each search where it stopped; LLM calls are cached in
    OUT/llm_cache.sqlite. Rerunning with other pair or value settings (pairs.min_gap, value.alpha
    ...) rebuilds the pairs and the export from the stored trees without LLM calls. With --executor ray, searches and greedy baselines run on Ray worker
    processes that rebuild the LLMs and retriever from this config; this process writes every
    record. Train with `agentrag train dpo --data OUT/dpo/trl_dpo.jsonl`.

    Exit codes: 0 every question finished; 3 some questions unfinished (an outage: rerun the same
    command to continue them); 2 bad input or configuration (a 401/404 from an LLM or retrieval
    endpoint included: the run stops, nothing is written as finished); 1 a bug.

    Example: agentrag synth reasonrag --dataset ../shared/data/hotpotqa/dev_distractor_200.jsonl
    --kb runs/kb --llm embedded --value spre --limit 2 --out runs/reasonrag --set mcts.iterations=4
    """
    with user_errors():
        from agentrag.synth.reasonrag.config import ReasonRagRunConfig
        from agentrag.synth.reasonrag.run import run_reasonrag

        base: dict[str, Any] = {"dataset": dataset or None, "kb": kb, "llm": llm, "judge": judge, "limit": limit,
                                "concurrency": concurrency}
        if value is not None:
            base["value"] = {"kind": value}
        cfg = resolve_config(ReasonRagRunConfig, config, sets, base=base)
        if show_config:
            print_config(cfg)
        # pair and label settings may change: the pairs are rebuilt from the stored trees
        out = run_dir_for(need_out(out), cfg, force_new=force_new_config, may_change=REBUILT_KEYS)
        with executor_from_options(executor, workers, ray_address, cfg.items_in_flight()) as ex, \
                progress_output() as progress:
            metrics = run_reasonrag(cfg, out, progress=progress, executor=ex, preflight=True)
        _summary(metrics, out)
    exit_if_unfinished(metrics["unfinished"], "questions")


def _summary(m: dict[str, Any], path: Path) -> None:
    calls = m["llm_calls"]
    console.print(f"  questions {m['questions']}  pairs {m['pairs']} ({m['pairs_per_question']} per question)  "
                  f"actions {m['actions']}  pair types {m['pair_types']}")
    console.print(f"  LLM calls {calls['total']} ({calls['per_question']} per question, "
                  f"{calls['per_kept_pair']} per kept pair)  best-leaf F1 "
                  f"{m['best_leaf_vs_greedy']['mean_best_leaf_f1']} vs greedy F1 "
                  f"{m['best_leaf_vs_greedy']['mean_greedy_f1']}  wall time {m['wall_s']} s")
    from agentrag.cli.funnel import print_empty_funnel, print_outputs, written

    print_empty_funnel(m, path)
    files = m["export"].get("files") or []
    trl = next((f for f in written(*files) if f.endswith("trl_dpo.jsonl")), None)
    print_outputs([("report", path / "report.md"), ("pairs", trl or "")])
    if not trl:
        reason = m["export"].get("skipped") or "no pair exported"
        console.print(styled((f"no DPO export: {reason}", "yellow")))


def register(synth_app: typer.Typer) -> None:
    synth_app.command("reasonrag")(reasonrag)
