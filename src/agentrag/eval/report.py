"""The evaluation report: metric table, hop table and step-count histogram (written by ``run_eval``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrag.render import Section, bar_chart_svg, write_report


def eval_sections(metrics: Mapping[str, Any], *, description: str = "") -> list[Section]:
    """Report sections for an evaluation's ``metrics.json`` content."""
    rows = [[name, metrics.get(key)] for name, key in (
        ("questions", "n"), ("EM", "em"), ("F1", "f1"), ("Acc (gold in prediction)", "acc"),
        ("LLM judge pass rate (score >= 1)", "judge_pass"), ("LLM judge mean score (0-2)", "judge_mean"),
        ("LLM judge errors (judge_error, no verdict)", "judge_errors"), ("gold passage recall", "recall"),
        ("mean retrieval steps", "mean_steps"), ("mean top-k per retrieval step", "mean_topk"),
        ("over the context window (scored, flagged)", "context_limit"),
        ("unfinished (outage or bug; redone on rerun)", "unfinished"), ("mean seconds per question", "mean_elapsed_s"))]
    sections = [Section(title="Metrics", text=description, headers=["metric", "value"], rows=rows)]
    fr = metrics.get("finish_reasons") or {}
    if fr:
        sections.append(Section(title="Finish reasons", headers=["finish reason", "count"],
                                rows=[[k, v] for k, v in sorted(fr.items())]))
    llm = metrics.get("llm") or {}
    if llm:
        keys = ["calls", "hits", "misses", "inner_calls", "prompt_tokens", "completion_tokens"]
        sections.append(Section(title="LLM usage", text="Per LLM of this invocation (agent, judge): cache hits "
                                "and misses, calls that reached the backend, tokens.",
                                headers=["role", *keys], rows=[[role, *[st.get(k) for k in keys]]
                                                              for role, st in llm.items()]))
    hops = metrics.get("hops") or {}
    table = hops.get("by_hops") or {}
    if table:
        cols = ["n", "accuracy", "em", "f1", "mean_steps", "steps_c", "steps_i", "collapse_rate",
                "over_extension_rate", "maxd"]
        sections.append(Section(
            title="Hop-aware diagnosis",
            text=("Accuracy is the verdict used for the diagnosis (LLM judge pass when judged, else EM). "
                  "Steps-C / Steps-I: mean retrieval steps of correct / incorrect answers; collapse: "
                  "steps < hops; over-extension: steps > hops; MaxD: mean highest depth answered "
                  "correctly (needs lower-hop questions). Overall: "
                  f"Steps-C {_f(hops.get('steps_c'))}, Steps-I {_f(hops.get('steps_i'))}, "
                  f"collapse {_f(hops.get('collapse_rate'))}, over-extension "
                  f"{_f(hops.get('over_extension_rate'))}, MaxD {_f(hops.get('maxd'))}."),
            headers=["hops", "n", "accuracy", "EM", "F1", "mean steps", "Steps-C", "Steps-I", "collapse",
                     "over-extension", "MaxD"],
            rows=[[h, *[row.get(c) for c in cols]] for h, row in table.items()]))
    table2 = hops.get("table2") or {}
    if table2:
        sections.append(Section(
            title="Tracer Table 2 (3- and 4-hop questions)",
            text=(f"MaxD over 3- and 4-hop questions: {_f(hops.get('maxd'))}. Mean top-k per retrieval step "
                  f"(Tracer Fig. 3): correct {_f(hops.get('topk_c'))}, incorrect {_f(hops.get('topk_i'))}."),
            headers=["subset", "n", "MaxD", "MaxD n", "Steps-C", "Steps-I"],
            rows=[[name, *[row.get(c) for c in ("n", "maxd", "maxd_n", "steps_c", "steps_i")]]
                  for name, row in table2.items()]))
    hist = hops.get("step_histogram") or {}
    if hist:
        sections.append(Section(title="Retrieval steps per question",
                                svg=bar_chart_svg(hist, x_label="retrieval steps", y_label="questions"),
                                caption="Number of questions by the count of retrieval (tool) steps."))
    return sections


def _f(v: Any) -> str:
    return "–" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def write_eval_report(run_dir: str | os.PathLike[str], metrics: Mapping[str, Any], *, title: str = "Evaluation",
                      description: str = "") -> tuple[Path, Path]:
    """Write the evaluation report (``report.md`` + ``report.html``) into ``run_dir``."""
    return write_report(run_dir, title, eval_sections(metrics, description=description))


__all__ = ["eval_sections", "write_eval_report"]
