"""``run_eval``: everything ``agentrag eval`` does, as one library call.

Check every input before anything is written (the dataset, the LLM references, the agent's
config, the retriever and, for a retrieval server, its ``/health``), open the run directory (the
writer lock: a second process on the same directory gets a :class:`~agentrag.errors.RunLockedError`
naming the first), write ``config.yaml``, build the components, evaluate the pending items under
the failure policy (:func:`agentrag.eval.runner.run_pending`), then write ``metrics.json`` (the
metrics, one LLM-usage block ``llm`` keyed by role, the unfinished count, the bugs, the wall time)
and the report, once, after the statistics exist. The statistics stream over ``results.jsonl``
(:class:`agentrag.eval.summary.Summary`): no result is held.

A no-op rerun: when the last invocation scored every question (nothing unfinished, no bug) and
stored its metrics in ``.finished.json`` (:meth:`RunDir.store <agentrag.runs.RunDir.store>`), and
neither :func:`finished_key` (the config, the dataset records' contents, the report's title and
description) nor any data file of the run (``results.jsonl``, ``config.yaml``: name, size, mtime)
changed since, those metrics are returned as they are (the finished run's wall time and LLM
usage) and nothing is built, read back or written. Anything else runs the full resume.

Outcomes: the metrics are returned (``unfinished > 0``: rerun the same call to finish them); an
endpoint error (401/403/404, unknown model), an unwritable run directory or bad input raises a
:class:`~agentrag.errors.UserError` at once; items that hit a bug raise :class:`EvalBugs` after
the metrics and the report are written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrag.config import config_source, load_config
from agentrag.errors import UserError
from agentrag.eval.defaults import resolved_eval_config
from agentrag.eval.judge import LLMJudge
from agentrag.eval.report import write_eval_report
from agentrag.eval.result import EvalResult
from agentrag.eval.runner import EvalConfig, run_pending, summarize
from agentrag.exec import Executor, ItemBugs, ThreadExecutor
from agentrag.llm.adaptive import default_items_in_flight, link_request_limits
from agentrag.llm.preflight import preflight_llm
from agentrag.llm.reference import config_llm_refs
from agentrag.llm.usage import llm_usage
from agentrag.progress import ProgressArg, progress_for
from agentrag.records import QAItem
from agentrag.runs import FINISHED, LOCK_NAME, RunDir, config_key, records_key

log = logging.getLogger(__name__)



class EvalBugs(ItemBugs):
    """Some eval items hit a bug (see :class:`~agentrag.exec.ItemBugs`); ``metrics`` is what
    ``metrics.json`` holds."""


def _config(cfg: EvalConfig | None, overrides: Mapping[str, Any]) -> EvalConfig:
    base = cfg.model_dump() if cfg is not None else {}
    return load_config(EvalConfig, base={**base, **overrides}, source=config_source(cfg) if cfg is not None else None)


def check_inputs(cfg: EvalConfig, out: str | os.PathLike[str], *, llm: Any = None, retriever: Any = None,
                 judge: Any = None) -> tuple[list[QAItem], Any]:
    """Every input of the evaluation, checked before the run directory is written: returns the
    items and the retriever (``retriever`` itself, else resolved from ``cfg.kb``)."""
    from agentrag.agents import agent_config
    from agentrag.eval.datasets import load_dataset
    from agentrag.llm.resolve import check_llm_ref
    from agentrag.paths import check_out_dir

    if not cfg.dataset:
        raise UserError("no dataset: pass --dataset FILE (or set 'dataset' in the --config file)")
    if retriever is None and not cfg.kb:
        raise UserError("no knowledge base: pass --kb DIR or --kb http://host:port")
    check_out_dir(out)
    items = load_dataset(cfg.dataset, cfg.fmt, limit=cfg.limit)
    for ref, given in ((cfg.llm, llm), (cfg.judge, judge)):
        if ref and given is None:
            check_llm_ref(ref)
    if isinstance(cfg.agent_config.get("executor_llm"), str):  # planner_executor's --executor-llm
        check_llm_ref(cfg.agent_config["executor_llm"])
    if cfg.correct_by == "judge" and not (cfg.judge or judge is not None):
        raise UserError("correct_by='judge' needs a judge: pass --judge REF (or use auto, em or acc)")
    agent_config(cfg.agent, source=config_source(cfg), prefix="agent_config.", **cfg.agent_config)
    if retriever is None:
        from agentrag.kb import resolve_retriever

        retriever = resolve_retriever(cfg.kb)
    from agentrag.kb import check_retriever

    check_retriever(retriever)  # a retrieval server: fail now (down, wrong token), not item by item
    return items, retriever


def run_eval(cfg: EvalConfig | None = None, out: str | os.PathLike[str] | None = None, *, llm: Any = None,
             retriever: Any = None, judge: Any = None, executor: Executor | None = None,
             progress: ProgressArg = None, on_result: Callable[[EvalResult], object] | None = None,
             preflight: bool = False, **overrides: Any) -> dict[str, Any]:
    """Evaluate an agent on a QA dataset into the run directory ``out`` (rerun = resume); returns
    the object written to ``metrics.json``.

    ``cfg`` (an :class:`EvalConfig`) and/or ``overrides`` (its keys: ``dataset``, ``kb``, ``agent``,
    ``llm``, ``judge``, ``limit``, ``concurrency``, ...) say what to run. ``llm``, ``retriever`` and
    ``judge`` take references (strings: ``llm="openai:m@URL"``, ``retriever="runs/kb"``) or
    objects (an LLM, a retriever, an LLM or :class:`LLMJudge`) in place of the config's; an LLM backend
    object (embedded, openai, hf) goes behind the run's ``llm_cache.sqlite`` as a reference does
    (other objects, e.g. fakes, are used as given); objects cannot be
    sent to a distributed executor. ``executor`` defaults to a thread pool of ``concurrency``;
    with another executor (Ray) every worker builds its own LLM, retriever, agent and judge from
    the config. ``progress``: heartbeat lines on stderr (``True``; by default when the session is
    interactive), none (``False``), or your callback ``progress("eval", done, total)`` (see
    :mod:`agentrag.progress`); ``on_result`` gets each result as it is written. With
    ``preflight`` (the CLI's default) every LLM endpoint the config names gets one cheap request
    (:func:`agentrag.llm.preflight.preflight_llm`; the retrieval server is checked once, with the
    inputs) once the run directory is locked, before the config is written and the first item
    starts. See the module
    docstring for what is raised.
    """
    from agentrag.threads import passive_openmp

    if out is None:
        raise UserError("no run directory: pass out=DIR (the CLI's --out)")
    refs = {key: obj for key, obj in (("llm", llm), ("judge", judge), ("kb", retriever)) if isinstance(obj, str)}
    llm, judge, retriever = (None if isinstance(x, str) else x for x in (llm, judge, retriever))
    cfg = _config(cfg, {**overrides, **refs})
    # llama.cpp's OpenMP threads must wait passively on a shared CPU; set before the KB's embedder
    # (torch/onnxruntime) can start an OpenMP runtime (an explicit user value wins)
    passive_openmp()
    given_retriever = retriever
    items, retriever = check_inputs(cfg, out, llm=llm, retriever=retriever, judge=judge)
    # the defaults of the backend the reference names, or of the LLM object given (the CLI's, too)
    cfg = resolved_eval_config(cfg, llm)
    in_process = executor is None or isinstance(executor, ThreadExecutor)
    if not in_process and any(x is not None for x in (llm, judge, given_retriever)):
        raise UserError("LLM, judge and retriever objects cannot be sent to a distributed executor: pass references "
                        "(llm, judge, kb in the config) so every worker builds its own")
    started = time.perf_counter()
    fresh = not Path(out).exists()
    title = f"Evaluation of {cfg.agent} on {Path(cfg.dataset).name}"
    description = (f"agent {cfg.agent}, LLM {_name(llm, cfg.llm)}, judge {_name(judge, cfg.judge) or 'none'}, "
                   f"KB {_name(given_retriever, cfg.kb)}")
    with RunDir(out) as run:
        if preflight:
            try:
                for _key, ref in config_llm_refs(cfg):
                    preflight_llm(ref)
            except UserError:
                if fresh:  # leave no half-made run directory behind
                    run.close()
                    (run.path / LOCK_NAME).unlink(missing_ok=True)
                    with contextlib.suppress(OSError):
                        run.path.rmdir()
                raise
        run.write_config(cfg)
        key = finished_key(cfg, items, title, description)
        found, stored = run.stored(FINISHED, key)
        if found and isinstance(stored, dict):  # a no-op rerun of a finished run: read nothing, write nothing
            log.info("%s: every question is scored and nothing changed since; reusing its metrics", run.path)
            write_outputs(run, stored, title, description, only_if_changed=True)
            return stored
        cache = run.file("llm_cache.sqlite")
        roles: dict[str, Any] = {}
        width = cfg.items_in_flight()
        agent: Any
        the_judge: LLMJudge | None = None
        if in_process:
            from agentrag.agents import build_agent
            from agentrag.llm import resolve_llm
            from agentrag.llm.cache import with_response_cache

            made: dict[int, Any] = {}  # backends passed as objects get the run's cache, as references do
            llm, judge = (with_response_cache(x, cache, made) for x in (llm, judge))
            agent_llm = llm if llm is not None else resolve_llm(cfg.llm, cache=cache)
            if judge is not None:
                the_judge = judge if isinstance(judge, LLMJudge) else LLMJudge(judge)
            elif cfg.judge:
                the_judge = LLMJudge(resolve_llm(cfg.judge, cache=cache))
            agent = build_agent(cfg.agent, agent_llm, retriever, **cfg.agent_config)
            roles = {"agent": agent_llm, "judge": the_judge.llm if the_judge else None}
            if cfg.concurrency is None and llm is not None:  # the default follows an LLM object passed in
                width = max(width, default_items_in_flight(llm))
            width = link_request_limits(roles.values(), width)  # the endpoints' request limit; items in flight
        else:  # each worker process builds LLM, retriever, agent and judge from the config
            from agentrag.eval.worker import EvalTask

            agent = EvalTask(cfg.model_dump(), cache)
        with progress_for(progress) as beat:
            results, stage = run_pending(agent, items, run, judge=the_judge, concurrency=width, maxd=cfg.maxd,
                                         correct_by=cfg.correct_by, progress=beat, on_result=on_result,
                                         executor=executor)
        # streamed from results.jsonl: no result (nor trajectory) is held for the statistics
        metrics = summarize(results, n_requested=len(items), unfinished={**stage.unfinished, **stage.bugs})
        metrics["bugs"] = len(stage.bugs)
        metrics["llm"] = llm_usage(roles)
        metrics["wall_s"] = metrics["invocation_wall_s"] = round(time.perf_counter() - started, 2)
        write_outputs(run, metrics, title, description)
        if not stage.unfinished and not stage.bugs:  # every question scored: a rerun may reuse this
            run.store(FINISHED, key, metrics)
    if stage.bugs:
        raise EvalBugs(stage.bugs, metrics)
    return metrics


def finished_key(cfg: EvalConfig, items: Sequence[QAItem], title: str, description: str) -> str:
    """What a finished run's metrics depend on besides the run directory's data files: the
    resolved config (``--limit``, ``--maxd``, the judge, ...), the dataset records' contents (an
    edited, added or removed question changes it) and the report's title and description."""
    return config_key(cfg, records_key(items), title, description)


def write_outputs(run: RunDir, metrics: dict[str, Any], title: str, description: str, *,
                  only_if_changed: bool = False) -> None:
    """``metrics.json`` and the report. ``only_if_changed`` (a reused finished run): leave both
    untouched when ``metrics.json`` already holds ``metrics`` and the report files exist."""
    if only_if_changed and all(run.file(n).exists() for n in ("report.md", "report.html")):
        try:
            if json.loads(run.file("metrics.json").read_text(encoding="utf-8")) == metrics:
                return
        except (OSError, ValueError):
            pass
    run.write_json("metrics.json", metrics)
    write_eval_report(run.path, metrics, title=title, description=description)


def _name(obj: Any, ref: str | None) -> str | None:
    """The reference of a component, or the class name of an object passed in its place."""
    return ref if obj is None else type(obj).__name__


__all__ = ["run_eval", "check_inputs", "EvalBugs"]
