"""``run_suite``: agents x datasets on one knowledge base and one LLM, into one run directory, and
the table of the papers' main results (ReasonRAG Table 2, RAGShaper Table 1): one row per agent,
EM and F1 per dataset, then their average over the datasets.

A suite file (YAML, :class:`SuiteConfig`)::

    kb: runs/kb
    llm: embedded
    limit: 20
    reference: standard_rag            # the row every other row is compared with
    agents:                            # a name from the agent registry, or a row with settings
      - naive
      - standard_rag
      - {name: ircot_k3, agent: ircot, agent_config: {top_k: 3}}
    datasets:                          # a file, or {name, path, fmt}
      - ../shared/data/hotpotqa/dev_distractor_200.jsonl
      - {name: 2wiki, path: ../shared/data/2wikimultihopqa/dev_with_context_164.jsonl}

The run directory holds ``config.yaml`` (the resolved suite), one eval run per cell under
``runs/<row>__<dataset>/`` (:func:`~agentrag.eval.run.run_eval`'s own directory: a rerun resumes
each cell, or reuses a finished one without running anything), the LLM response cache shared by
every cell (``llm_cache.sqlite``), and the table: ``suite.json`` and ``suite.md``. The table's
intervals are paired bootstrap 95% intervals of ``row - reference`` on the questions both rows
scored (:func:`agentrag.eval.compare.bootstrap_diff` per dataset; the average's resamples each
dataset separately and averages the datasets' mean differences, as the average column does).
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from agentrag.config import Config, load_config
from agentrag.errors import UserError
from agentrag.eval.run import EvalBugs, run_eval
from agentrag.eval.runner import CorrectBy, EvalConfig
from agentrag.llm.adaptive import ITEMS_IN_FLIGHT_HELP
from agentrag.runs import RunDir

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
Progress = Callable[[str, int, int], None]


class SuiteRow(Config):
    """One row of the table: an agent of the registry with its settings (``name`` defaults to the agent's)."""

    name: str = ""
    agent: str
    agent_config: dict[str, Any] = Field(default_factory=dict)


class SuiteDataset(Config):
    """One dataset column pair (``name`` defaults to the file's folder, e.g. ``hotpotqa``)."""

    name: str = ""
    path: str
    fmt: str = "auto"


class SuiteConfig(Config):
    """A suite: ``agents`` x ``datasets`` on one ``kb`` and one ``llm`` (see the module docstring)."""

    kb: str = ""
    llm: str = "embedded"
    judge: str | None = None
    limit: int | None = Field(default=None, ge=1, description="the first N questions of every dataset")
    concurrency: int | None = Field(default=None, ge=1, description=ITEMS_IN_FLIGHT_HELP)
    correct_by: CorrectBy = "auto"
    agents: list[SuiteRow] = Field(min_length=1)
    datasets: list[SuiteDataset] = Field(min_length=1)
    reference: str | None = Field(default=None, description="the row the others are compared with (default: the first)")
    resamples: int = Field(default=2000, ge=100, description="bootstrap resamples of each interval")
    seed: int = 0

    @field_validator("agents", mode="before")
    @classmethod
    def _rows(cls, v: Any) -> Any:
        return [{"agent": x} if isinstance(x, str) else x for x in v] if isinstance(v, list) else v

    @field_validator("datasets", mode="before")
    @classmethod
    def _datasets(cls, v: Any) -> Any:
        return [{"path": x} if isinstance(x, str) else x for x in v] if isinstance(v, list) else v

    @model_validator(mode="after")
    def _names(self) -> SuiteConfig:
        for row in self.agents:
            if not row.name:
                row.name = row.agent
        for ds in self.datasets:
            if not ds.name:
                ds.name = Path(ds.path).parent.name or Path(ds.path).stem
        for what, names in (("agents", [r.name for r in self.agents]), ("datasets", [d.name for d in self.datasets])):
            for n in names:
                if not _NAME.match(n):
                    raise ValueError(f"{what}: name {n!r} must be letters, digits, '_', '.' or '-' (it names a "
                                     "folder of the run)")
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{what}: the name {dup[0]!r} is used twice; give each entry its own 'name'")
        if self.reference is None:
            self.reference = self.agents[0].name
        elif self.reference not in {r.name for r in self.agents}:
            raise ValueError(f"reference {self.reference!r} is not a row; choose one of "
                             f"{', '.join(r.name for r in self.agents)}")
        return self

    def cell_config(self, row: SuiteRow, ds: SuiteDataset) -> EvalConfig:
        """The eval config of one cell."""
        return EvalConfig(dataset=ds.path, fmt=ds.fmt, kb=self.kb, agent=row.agent, agent_config=dict(row.agent_config),
                          llm=self.llm, judge=self.judge, limit=self.limit, concurrency=self.concurrency,
                          correct_by=self.correct_by)


def cell_dir(out: str | os.PathLike[str], row: str, dataset: str) -> Path:
    """The eval run directory of one cell of the suite in ``out``."""
    return Path(out) / "runs" / f"{row}__{dataset}"


def load_suite(path: str | os.PathLike[str], overrides: Sequence[str] = (), **base: Any) -> SuiteConfig:
    """A suite file (YAML) with ``--set`` overrides; ``base`` values (not None) under the file's."""
    return load_config(SuiteConfig, Path(path), overrides, base={k: v for k, v in base.items() if v is not None})


def run_suite(cfg: SuiteConfig | str | os.PathLike[str], out: str | os.PathLike[str], *, llm: Any = None,
              retriever: Any = None, judge: Any = None, progress: Progress | None = None) -> dict[str, Any]:
    """Run every agent of the suite on every dataset into ``out`` (rerun = resume) and write the
    table (``suite.json``, ``suite.md``); returns what ``suite.json`` holds.

    ``cfg`` is a :class:`SuiteConfig` or the path of a suite file. The LLM, the retriever and the
    judge are built once from the config (``llm``, ``retriever``, ``judge`` objects replace them)
    and shared by every cell; the LLM responses are cached in ``out/llm_cache.sqlite``. A cell
    whose items hit a bug does not stop the others: :class:`~agentrag.eval.run.EvalBugs` is raised
    at the end, after the table is written. Items left unfinished by an outage are counted in the
    table's ``unfinished``; rerun to finish them."""
    from agentrag.agents import agent_config
    from agentrag.eval.datasets import load_dataset
    from agentrag.llm.resolve import check_llm_ref
    from agentrag.paths import check_out_dir
    from agentrag.threads import passive_openmp

    if not isinstance(cfg, SuiteConfig):
        cfg = load_suite(cfg)
    passive_openmp()
    check_out_dir(out)
    if retriever is None and not cfg.kb:
        raise UserError("the suite has no knowledge base: set 'kb' (a KB directory or http://host:port)")
    for ds in cfg.datasets:  # every input checked before anything is written
        load_dataset(ds.path, ds.fmt, limit=1)
    for row in cfg.agents:
        agent_config(row.agent, **row.agent_config)
    for ref, given in ((cfg.llm, llm), (cfg.judge, judge)):
        if ref and given is None:
            check_llm_ref(ref)
    started = time.perf_counter()
    bugs: dict[str, str] = {}
    with RunDir(out) as run:
        run.write_config(cfg)
        if llm is None or (judge is None and cfg.judge) or retriever is None:
            from agentrag.llm import resolve_llm

            cache = run.file("llm_cache.sqlite")
            llm = llm if llm is not None else resolve_llm(cfg.llm, cache=cache)
            if judge is None and cfg.judge:
                judge = resolve_llm(cfg.judge, cache=cache)
        if retriever is None:
            from agentrag.kb import resolve_retriever

            retriever = resolve_retriever(cfg.kb)
        check = getattr(retriever, "health", None)
        if callable(check):
            check()
        for row in cfg.agents:
            for ds in cfg.datasets:
                where = cell_dir(run.path, row.name, ds.name)
                log.info("suite cell %s x %s -> %s", row.name, ds.name, where)
                try:
                    run_eval(cfg.cell_config(row, ds), where, llm=llm, retriever=retriever, judge=judge,
                             progress=progress)
                except EvalBugs as exc:
                    bugs.update({f"{row.name}/{ds.name}/{k}": v for k, v in exc.bugs.items()})
        table = suite_table(cfg, run.path)
        table["wall_s"] = round(time.perf_counter() - started, 2)
        run.write_json("suite.json", table)
        run.write_text("suite.md", suite_markdown(table))
    if bugs:
        raise EvalBugs(bugs, table)
    return table


def suite_table(cfg: SuiteConfig, out: str | os.PathLike[str]) -> dict[str, Any]:
    """The table of the suite in ``out`` from its cells' ``results.jsonl`` (the main questions the
    suite asks for: the first ``limit`` of each dataset, whatever an earlier run with a larger limit
    left in the file): per row and dataset n, EM, F1 and unfinished; the average over the datasets;
    and, for every row but the reference, the paired bootstrap differences (row - reference) with
    95% intervals."""
    import json

    # imported here: ``agentrag.eval`` (which imports this module) must not load ``compare`` before
    # ``python -m agentrag.eval.compare`` runs it (runpy warns of a module imported twice)
    from agentrag.eval.compare import bootstrap_diff, load_results
    from agentrag.eval.datasets import load_dataset

    wanted = {ds.name: {i.id for i in load_dataset(ds.path, ds.fmt, limit=cfg.limit)} for ds in cfg.datasets}

    names = [d.name for d in cfg.datasets]
    scores: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for row in cfg.agents:
        scores[row.name], cells[row.name] = {}, {}
        for ds in cfg.datasets:
            where = cell_dir(out, row.name, ds.name)
            try:
                results = load_results(where)
            except UserError:
                results = {}
            main = {i: (r.em, r.f1) for i, r in results.items() if r.parent_id is None and i in wanted[ds.name]}
            scores[row.name][ds.name] = main
            unfinished = 0
            try:
                unfinished = len(json.loads((where / "unfinished.json").read_text(encoding="utf-8")))
            except (OSError, ValueError):
                pass
            cells[row.name][ds.name] = {"n": len(main), "em": _mean([s[0] for s in main.values()]),
                                        "f1": _mean([s[1] for s in main.values()]), "unfinished": unfinished}
    average = {r: {m: _mean([c[m] for c in cells[r].values()]) if all(c["n"] for c in cells[r].values()) else None
                   for m in ("em", "f1")} for r in cells}
    ref = str(cfg.reference)
    deltas: dict[str, Any] = {}
    for row in cfg.agents:
        if row.name == ref:
            continue
        per: dict[str, Any] = {}
        paired: dict[str, dict[str, tuple[list[float], list[float]]]] = {"em": {}, "f1": {}}
        for name in names:
            a, b = scores[ref][name], scores[row.name][name]
            ids = sorted(set(a) & set(b))
            per[name] = {"n_paired": len(ids)}
            for j, m in enumerate(("em", "f1")):
                xs, ys = [a[i][j] for i in ids], [b[i][j] for i in ids]
                paired[m][name] = (xs, ys)
                per[name][m] = _interval(*bootstrap_diff(xs, ys, resamples=cfg.resamples, seed=cfg.seed)) if ids else None
        per["average"] = {m: (_interval(*stratified_bootstrap(list(paired[m].values()), resamples=cfg.resamples,
                                                              seed=cfg.seed))
                              if all(xs for xs, _ in paired[m].values()) else None) for m in ("em", "f1")}
        deltas[row.name] = per
    return {"reference": ref, "rows": [r.name for r in cfg.agents], "agents": {r.name: r.agent for r in cfg.agents},
            "datasets": names, "cells": cells, "average": average, "delta": deltas, "resamples": cfg.resamples,
            "unfinished": sum(c["unfinished"] for r in cells.values() for c in r.values())}


def stratified_bootstrap(groups: Sequence[tuple[Sequence[float], Sequence[float]]], *, resamples: int = 2000,
                         seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """The mean over groups of each group's paired mean difference ``b - a``, and its percentile
    bootstrap interval (each resample draws every group's pairs with replacement, within the group)."""
    diffs = [[y - x for x, y in zip(a, b, strict=True)] for a, b in groups]
    if not diffs or not all(diffs):
        raise ValueError("stratified_bootstrap needs non-empty paired groups")
    rng = random.Random(seed)

    def macro(sample: Callable[[list[float]], list[float]]) -> float:
        return sum(sum(s) / len(s) for s in (sample(d) for d in diffs)) / len(diffs)

    means = sorted(macro(lambda d: [rng.choice(d) for _ in d]) for _ in range(resamples))
    lo = means[int((1 - level) / 2 * resamples)]
    hi = means[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return round(macro(lambda d: d), 4), round(lo, 4), round(hi, 4)


def _interval(mean: float, lo: float, hi: float) -> dict[str, Any]:
    return {"mean": mean, "ci95": [lo, hi], "excludes_0": lo > 0 or hi < 0}


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def _delta(d: dict[str, Any] | None) -> str:
    if not d:
        return "–"
    lo, hi = d["ci95"]
    return f"{100 * d['mean']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]{'*' if d['excludes_0'] else ''}"


def result_rows(table: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The table in the papers' layout: headers (Method, then EM and F1 per dataset, then the
    average) and one row per method, in percent with one decimal."""
    names = table["datasets"]
    head = ["Method", *[f"{d} {m}" for d in names for m in ("EM", "F1")], "Avg EM", "Avg F1"]
    rows = [[r, *[_pct(table["cells"][r][d][m]) for d in names for m in ("em", "f1")],
             _pct(table["average"][r]["em"]), _pct(table["average"][r]["f1"])] for r in table["rows"]]
    return head, rows


def delta_rows(table: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The differences from the reference row in the same layout: ``+d [lo, hi]`` in points, ``*``
    when the 95% interval excludes 0."""
    names = table["datasets"]
    head = ["Method", *[f"{d} {m}" for d in names for m in ("EM", "F1")], "Avg EM", "Avg F1"]
    rows = [[r, *[_delta(per[d][m]) for d in names for m in ("em", "f1")], _delta(per["average"]["em"]),
             _delta(per["average"]["f1"])] for r, per in table["delta"].items()]
    return head, rows


def _md(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def suite_markdown(table: dict[str, Any]) -> str:
    """The table as Markdown, in the papers' layout: EM and F1 (percent) per dataset, then the
    average; below it the differences from the reference row with their 95% intervals."""
    names, rows, ref = table["datasets"], table["rows"], table["reference"]
    lines = _md(*result_rows(table))
    ns = ", ".join(f"{d} {min(table['cells'][r][d]['n'] for r in rows)}" for d in names)
    lines += ["", f"Questions scored per dataset (fewest over the rows): {ns}."]
    if table.get("unfinished"):
        lines.append(f"{table['unfinished']} items unfinished (an outage); rerun the suite to finish them.")
    if table["delta"]:
        lines += ["", f"Difference from {ref} (row - {ref}, points), paired bootstrap 95% interval "
                  f"({table['resamples']} resamples; * the interval excludes 0):", "", *_md(*delta_rows(table))]
    return "\n".join(lines) + "\n"


__all__ = ["SuiteConfig", "SuiteRow", "SuiteDataset", "run_suite", "load_suite", "suite_table", "suite_markdown",
           "result_rows", "delta_rows", "stratified_bootstrap", "cell_dir"]
