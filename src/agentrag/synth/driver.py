"""The one driver of the four synthesizers (RAGShaper, EviPath, ReasonRAG, Tracer).

A synthesizer is a declaration, :class:`Synthesizer`: its stages (name, input, output, gates),
how to check its inputs, how to build its components (the same recipe Ray workers use), what a
finished run's output depends on (``finished_key``), its pipeline (the steps over pending items
and the report: :class:`Pipeline`), and its report sections. :func:`run_synthesizer` does the rest, the
same way for all four (and their CLI commands and ``run_*`` functions alike):

1. check every input before anything is written (:meth:`Synthesizer.check_inputs`);
2. open the run directory (taking its writer lock) and write the resolved config;
3. build the components (:meth:`Synthesizer.components`; LLM and retriever objects passed by a
   Python caller replace the references);
4. reuse the output of a finished run that nothing changed since (:meth:`Synthesizer.finished_key`),
   or run the synthesizer's :class:`Pipeline`: its steps in order over pending items through the
   executor seam (flows of overlapping stages, then each :class:`PendingStage` catching up the
   items the flows did not reach, minus the ones this run already left unfinished; :class:`SynthRun`
   applies the failure policy of :mod:`agentrag.exec.policy` and tallies unfinished items), then
   its report (statistics and exports, reused when no data file changed: ``report_key``);
5. assemble the typed metrics (:class:`SynthMetrics`: funnel per declared stage, unfinished
   count, one LLM-usage block, wall time), write ``metrics.json``;
6. write the report once, after the statistics exist.

Reruns keep the run's record. A no-op rerun of a finished run (step 4 reuses its output) writes
nothing: ``metrics.json`` and the reports stay as the run that did the work left them (they are
written again, from the stored metrics, only when missing or changed). A rerun that does run the
pipeline (a resume after an outage or a crash, more items) reports the LLM usage and wall time of
every invocation that wrote ``metrics.json`` summed (``invocations`` of them; this one's alone in
``invocation_wall_s`` and ``invocation_llm``).

A fatal error (401/404, unknown model, unwritable directory) propagates at once; items hit by an
outage stay unfinished (``metrics["unfinished"]``, exit code 3 from the CLI); a bug is logged and
raised as :class:`SynthBugs` after the metrics are written (exit code 1).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from agentrag.errors import UserError
from agentrag.exec import Executor, ItemBugs, Progress, StageResult, ThreadExecutor, run_flow, run_stage
from agentrag.exec.flow import Task, Writer
from agentrag.llm.adaptive import default_items_in_flight, link_request_limits
from agentrag.llm.cache import with_response_cache
from agentrag.llm.usage import add_usage, llm_usage
from agentrag.progress import ProgressArg, progress_for
from agentrag.runs import FINISHED, RunDir
from agentrag.threads import passive_openmp

log = logging.getLogger(__name__)

Cfg = TypeVar("Cfg")
Inputs = TypeVar("Inputs")
Comps = TypeVar("Comps")
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Stage:
    """One declared stage: its name, what it reads and writes, and the gates it applies;
    ``unit``: what its in/out count when that is not the previous stage's unit (e.g. EviPath's
    sub-questions between items), so the funnel says why ``in`` is not the ``out`` above."""

    name: str
    input: str
    output: str
    gates: tuple[str, ...] = ()
    about: str = ""
    unit: str = ""


class FunnelRow(BaseModel):
    """One stage of the funnel: items in and out, rejections by reason, items left unfinished."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    stage: str
    input: str = ""
    output: str = ""
    n_in: int = Field(alias="in")
    out: int
    rejected: dict[str, int] = Field(default_factory=dict)
    unfinished: int = 0
    unit: str = ""


class SynthMetrics(BaseModel):
    """What every synthesizer run reports (``metrics.json``); ``details`` holds the synthesizer's
    own statistics (written at the top level of ``metrics.json`` beside these keys)."""

    model_config = ConfigDict(extra="forbid")

    synthesizer: str
    name: str
    funnel: list[FunnelRow]
    unfinished: int = 0
    unfinished_by_stage: dict[str, int] = Field(default_factory=dict)
    unfinished_items: dict[str, str] = Field(default_factory=dict)
    bugs: int = 0
    llm: dict[str, dict[str, Any]] = Field(default_factory=dict)
    wall_s: float = 0.0
    #: how many invocations ``llm`` and ``wall_s`` sum (a resumed run's earlier ones included)
    invocations: int = 1
    invocation_wall_s: float = 0.0
    invocation_llm: dict[str, dict[str, Any]] = Field(default_factory=dict)
    export: dict[str, Any] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The ``metrics.json`` object: the typed keys plus ``details`` at the top level."""
        out = {**self.details, **self.model_dump(by_alias=True, exclude={"details"})}
        return out


@dataclass
class SynthOutput:
    """What a pipeline hands back to the driver: per declared stage ``(in, out, rejected)``, the
    export summary, and the synthesizer's own statistics."""

    counts: Mapping[str, tuple[int, int, Mapping[str, int]]] = field(default_factory=dict)
    export: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def ids_key(ids: Iterable[str]) -> str:
    """A short key of a set of item ids (for :attr:`Pipeline.report_key`)."""
    import hashlib

    return hashlib.sha1("\n".join(sorted(ids)).encode("utf-8")).hexdigest()


def _output_json(out: SynthOutput) -> dict[str, Any]:
    return {"counts": {k: [a, b, dict(c)] for k, (a, b, c) in out.counts.items()}, "export": out.export,
            "details": out.details}


def _output(got: Mapping[str, Any]) -> SynthOutput:
    return SynthOutput(counts={k: (a, b, c) for k, (a, b, c) in got["counts"].items()}, export=got["export"],
                       details=got["details"])


@dataclass(frozen=True)
class PendingStage(Generic[T, R]):
    """A stage run over the items it still has to do: ``pending()`` lists them when the step's
    turn comes (after the steps before it wrote their records); the driver drops the ones this
    run already left unfinished or hit a bug on (a rerun tries them again) and runs ``task`` over
    the rest under the failure policy, writing each result with ``write``. After a flow, this is
    the catch-up of the items the flow did not reach (those of an earlier run)."""

    stage: str
    task: Callable[[T], R]
    pending: Callable[[], Iterable[T]]
    write: Callable[[T, R], object]
    #: the item's id, as the stage tallies it (default: its ``id``)
    key: Callable[[T], str] = field(default=lambda item: str(item.id))


#: one step of a pipeline: a plain function (a flow, a step without per-item work) or a stage over
#: its pending items
PipelineStep = Callable[[], object] | PendingStage[Any, Any]


@dataclass
class Pipeline:
    """What a synthesizer runs over its run directory: ``steps`` in order, then ``report()`` (the
    statistics and exports after the stages). With ``report_key`` the report is reused when no
    data file of the run changed since the last one (:meth:`RunDir.derived`; ``report_key()``,
    asked after the steps: what else it depends on, e.g. the item ids), so a no-op rerun reads no
    record and writes no export."""

    steps: Sequence[PipelineStep]
    report: Callable[[], SynthOutput]
    report_key: Callable[[], str] | None = None
    #: the ids of the run's input items in input order (asked after the steps): once every item is
    #: finished, the stage files are put in that order with their timings apart
    #: (:meth:`RunDir.finish_stages`) before the report reads them
    order: Callable[[], Iterable[str]] | None = None


def run_pipeline(ctx: SynthRun, pipeline: Pipeline) -> SynthOutput:
    """Every step of ``pipeline`` in order; when no item was left unfinished, the stage files in
    their final form (input order, timings apart: :attr:`Pipeline.order`); then its report (reused
    as :class:`Pipeline` says)."""
    for step in pipeline.steps:
        if isinstance(step, PendingStage):
            ctx.stage(step.stage, step.task, [x for x in step.pending() if not ctx.failed(step.stage, step.key(x))],
                      step.write)
        else:
            step()
    if pipeline.order is not None and not ctx.unfinished_by_stage:
        ctx.run.finish_stages(pipeline.order())
    if pipeline.report_key is None:
        return pipeline.report()
    report = pipeline.report
    return _output(ctx.run.derived(pipeline.report_key(), lambda: _output_json(report())))


def run_or_reuse(synth: Synthesizer[Any, Any, Any], ctx: SynthRun, cfg: Any, comps: Any, inputs: Any) -> SynthOutput:
    """The output of the last run when it finished every item, its :meth:`Synthesizer.finished_key`
    is the same (the config and the items asked for) and no data file of the run changed since
    (:meth:`RunDir.stored`: names, sizes and mtimes, nothing read): a no-op rerun then opens no
    stage file and scans nothing for pending work (and :func:`finish_run` keeps the stored
    metrics: ``ctx.reused``). Otherwise the synthesizer's pipeline (the full
    resume: stages, statistics, exports); its output is kept for the next rerun only when no item
    was left unfinished (an outage, a bug) and nothing raised. A rerun after a crash, an outage,
    an appended, edited or deleted file, another config or other items therefore runs the full
    resume. A synthesizer without a finished key always runs its pipeline."""
    key = synth.finished_key(cfg, inputs)
    if key is not None:
        found, got = ctx.run.stored(FINISHED, key)
        if found:
            ctx.reused, ctx.finished_key = got, key
            return _output(got)
    out = run_pipeline(ctx, synth.pipeline(ctx, cfg, comps, inputs))
    if key is not None and not ctx.unfinished_by_stage:
        ctx.run.store(FINISHED, key, _output_json(out))
        ctx.finished_key = key
    return out


class SynthBugs(ItemBugs):
    """Some items of a synthesizer run hit a bug (see :class:`~agentrag.exec.ItemBugs`)."""


@dataclass
class SynthRun:
    """The running context a pipeline gets from the driver: the run directory, the executor, the
    progress callback, and what its stages left unfinished."""

    run: RunDir
    executor: Executor
    progress: Progress | None = None
    results: dict[str, StageResult] = field(default_factory=dict)
    #: the stored value of a finished run this invocation reused (:func:`run_or_reuse`), if any
    reused: dict[str, Any] | None = None
    #: the key the finished output is stored under this invocation (None: not stored)
    finished_key: str | None = None

    def stage(self, name: str, fn: Callable[[T], R], items: Iterable[T],
              on_result: Callable[[T, R], object] | None = None, *, progress: bool = True) -> StageResult:
        """Run one stage's per-item function over ``items`` under the failure policy; the driver
        (this process) writes each result with ``on_result``."""
        res = run_stage(self.executor, fn, items, stage=name, progress=self.progress if progress else None,
                        on_result=on_result)
        self.results.setdefault(name, StageResult(stage=name)).merge(res)
        return res

    def flow(self, steps: Mapping[str, tuple[Callable[[Any], Any], Writer]], first: Iterable[Task], *,
             progress: bool | Collection[str] = True) -> dict[str, StageResult]:
        """Run stages that overlap (:func:`agentrag.exec.run_flow`): ``steps`` maps a stage name to
        its per-item function and its writer, which writes a result and returns the follow-up
        tasks ``[(stage, item), ...]`` it makes possible; ``first`` are the tasks to start with.
        Each stage's outcome is tallied under its own name, as :meth:`stage` does; ``progress``:
        whether (or for which stages) to report tasks done to the progress callback."""
        shown = set(steps) if progress is True else set(progress or ())
        report = self.progress
        cb = None if report is None or not shown else (
            lambda stage, done, total: report(stage, done, total) if stage in shown else None)
        got = run_flow(self.executor, {k: fn for k, (fn, _) in steps.items()},
                       {k: w for k, (_, w) in steps.items()}, first, progress=cb)
        for name, res in got.items():
            self.results.setdefault(name, StageResult(stage=name)).merge(res)
        return got

    def failed(self, stage: str, key: str) -> bool:
        """Whether this run already left the item ``key`` unfinished (an outage, a lost worker) or
        hit a bug on it in ``stage``: a plain stage run after a flow does not try it again (a
        rerun does)."""
        r = self.results.get(stage)
        return r is not None and (key in r.unfinished or key in r.bugs)

    def unfinished(self, stage: str, key: str, reason: str) -> None:
        """Note an item the pipeline itself leaves unfinished (e.g. a search that hit an outage)."""
        self.results.setdefault(stage, StageResult(stage=stage)).unfinished[key] = reason

    @property
    def unfinished_by_stage(self) -> dict[str, int]:
        return {k: len(v.unfinished) + len(v.bugs) for k, v in self.results.items() if v.unfinished or v.bugs}


class Synthesizer(Generic[Cfg, Inputs, Comps]):
    """A synthesizer's declaration (see the module docstring); subclasses fill in the hooks."""

    name: ClassVar[str] = ""
    stages: ClassVar[tuple[Stage, ...]] = ()
    #: the objects a Python caller may pass in place of references (``run_<name>(..., llm=obj)``)
    given: ClassVar[tuple[str, ...]] = ()
    #: the components recipe (a :class:`~agentrag.synth.worker.ComponentsRecipe` class with a
    #: ``from_config(cfg, run_dir)``), or None for components without live clients
    recipe: ClassVar[type[Any] | None] = None
    #: what the run viewer (``agentrag view``) reads of this synthesizer: the files that mark its
    #: run directory (all must exist; none: not viewable), the config keys its header names, and
    #: ``"module:function"`` of the page-data loader (``function(run_dir, limits) -> Payload``)
    run_files: ClassVar[tuple[str, ...]] = ()
    key_config: ClassVar[tuple[str, ...]] = ()
    viewer: ClassVar[str] = ""

    def check_inputs(self, cfg: Cfg, out: str | os.PathLike[str], given: Mapping[str, Any]) -> Inputs:
        """Check everything the run needs before anything is written; return the inputs."""
        raise NotImplementedError

    def components(self, cfg: Cfg, run: RunDir, inputs: Inputs, given: Mapping[str, Any]) -> Comps:
        """Build the run's components with the recipe workers use; objects in ``given`` (LLMs,
        retrievers) replace the references of the config."""
        raise NotImplementedError

    def llm_roles(self, comps: Comps) -> dict[str, Any]:
        """``{role: LLM object}`` of the run, for the LLM-usage block."""
        raise NotImplementedError

    def finished_key(self, cfg: Cfg, inputs: Inputs) -> str | None:
        """What a finished run's stored output depends on besides the run's data files (the config
        and the items asked for; :func:`run_or_reuse`); ``None``: never reused."""
        return None

    def pipeline(self, ctx: SynthRun, cfg: Cfg, comps: Comps, inputs: Inputs) -> Pipeline:
        """The steps over pending items and the report (:class:`Pipeline`); the driver runs them."""
        raise NotImplementedError

    def title(self, cfg: Cfg, name: str) -> str:
        return f"{self.name} run {name}"

    def report_sections(self, metrics: dict[str, Any]) -> Sequence[Any]:
        """The report's sections (:class:`agentrag.render.Section` or dicts) from ``metrics.json``."""
        raise NotImplementedError

    def concurrency(self, cfg: Cfg) -> int:
        """Items in flight: ``cfg.items_in_flight()`` (``concurrency``, or its default for the LLMs the
        config names: :func:`agentrag.llm.adaptive.default_items_in_flight`) where the config has it."""
        pick = getattr(cfg, "items_in_flight", None)
        if callable(pick):
            return int(pick())
        return int(getattr(cfg, "concurrency", 1) or 1)


def funnel_rows(stages: Sequence[Stage], counts: Mapping[str, tuple[int, int, Mapping[str, int]]],
                unfinished: Mapping[str, int]) -> list[FunnelRow]:
    """The funnel in declaration order (a stage the pipeline did not count is left out); a stage
    without a ``unit`` counts what the stage before it counts (the first: items)."""
    rows = []
    unit = "items"
    for st in stages:
        unit = st.unit or unit
        if st.name not in counts:
            continue
        n_in, n_out, rejected = counts[st.name]
        rows.append(FunnelRow.model_validate({"stage": st.name, "input": st.input, "output": st.output, "in": n_in,
                                              "out": n_out, "rejected": dict(rejected),
                                              "unfinished": unfinished.get(st.name, 0), "unit": unit}))
    return rows


def finish_run(synth: Synthesizer[Any, Any, Any], cfg: Any, ctx: SynthRun, comps: Any, output: SynthOutput,
           elapsed: float) -> dict[str, Any]:
    """Metrics, ``metrics.json`` and the report, written once, after the statistics exist. A
    reused finished run (``ctx.reused`` with its metrics) keeps its record: nothing is written
    unless ``metrics.json`` or a report is missing or changed. Otherwise the LLM usage and wall
    time are this invocation's plus those of the run's earlier ``metrics.json`` (a resume sums
    what every invocation paid); the finished output is stored again with the metrics."""
    name = ctx.run.path.name
    kept = ctx.reused.get("metrics") if ctx.reused is not None else None
    if isinstance(kept, dict):
        _keep_record(synth, cfg, ctx.run, kept)
        return kept
    unfinished_items = {k: v for r in ctx.results.values() for k, v in {**r.unfinished, **r.bugs}.items()}
    by_stage = ctx.unfinished_by_stage
    now = llm_usage(synth.llm_roles(comps))
    before = _earlier_metrics(ctx.run, synth.name)
    metrics = SynthMetrics(
        synthesizer=synth.name, name=name, funnel=funnel_rows(synth.stages, output.counts, by_stage),
        unfinished=len(unfinished_items), unfinished_by_stage=by_stage, unfinished_items=unfinished_items,
        bugs=sum(len(r.bugs) for r in ctx.results.values()), llm=add_usage(before.get("llm") or {}, now),
        wall_s=round(float(before.get("wall_s") or 0.0) + elapsed, 1),
        invocations=int(before.get("invocations") or (1 if before else 0)) + 1,
        invocation_wall_s=round(elapsed, 1), invocation_llm=now,
        export=output.export, details=output.details).as_dict()
    _write_record(synth, cfg, ctx.run, metrics)
    if ctx.finished_key is not None:  # what a no-op rerun keeps: the output and this record
        ctx.run.store(FINISHED, ctx.finished_key, {**_output_json(output), "metrics": metrics})
    return metrics


def _earlier_metrics(run: RunDir, synthesizer: str) -> dict[str, Any]:
    """The run's ``metrics.json`` as the last invocation wrote it (``{}``: none, unreadable, or
    another synthesizer's)."""
    try:
        got = json.loads(run.file("metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(got, dict) or got.get("synthesizer") != synthesizer:
        return {}
    return got


def _write_record(synth: Synthesizer[Any, Any, Any], cfg: Any, run: RunDir, metrics: dict[str, Any]) -> None:
    """``metrics.json`` and the report (an empty run's explanation first)."""
    from agentrag.render import write_report

    run.write_json("metrics.json", metrics)
    config = cfg.model_dump(mode="json") if isinstance(cfg, BaseModel) else None
    ends = run_sections(metrics, config)
    why = [s for s in ends if s["title"].startswith(WHY)]  # an empty run says why first
    write_report(run.path, synth.title(cfg, run.path.name),
                 [*why, *synth.report_sections(metrics), *(s for s in ends if s not in why)])


def _keep_record(synth: Synthesizer[Any, Any, Any], cfg: Any, run: RunDir, metrics: dict[str, Any]) -> None:
    """Leave ``metrics.json`` and the reports as they are when they hold ``metrics``; write them
    from ``metrics`` when one is missing or ``metrics.json`` was edited."""
    if all(run.file(n).exists() for n in ("report.md", "report.html")):
        if _earlier_metrics(run, synth.name) == metrics:
            return
    _write_record(synth, cfg, run, metrics)


#: the title of the section that explains an empty or near-empty run (:mod:`agentrag.synth.advice`)
WHY = "Why this run produced"


def run_sections(metrics: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The sections every synthesizer report ends with: why the run produced nothing or little
    (:mod:`agentrag.synth.advice`, advice naming only ``config``'s settings), LLM usage per
    role, unfinished items."""
    from agentrag.synth.advice import explanation_section

    keys = ("hits", "misses", "inner_calls", "prompt_tokens", "completion_tokens", "backend_latency_s")
    rows = [[role, *(st.get(k, "") for k in keys)] for role, st in metrics.get("llm", {}).items()]
    runs = int(metrics.get("invocations") or 1)
    wall = (f"Wall time {metrics.get('wall_s')} s" if runs == 1 else
            f"Wall time {metrics.get('wall_s')} s and LLM usage summed over the {runs} invocations that did "
            f"this run's work (the last: {metrics.get('invocation_wall_s')} s)")
    out: list[dict[str, Any]] = [{
        "title": "LLM usage", "text": f"{wall}. Cache hits are calls answered "
        "from this run's llm_cache.sqlite; backend calls reached the endpoint.",
        "headers": ["LLM (roles)", "cache hits", "cache misses", "backend calls", "prompt tokens",
                    "completion tokens", "backend seconds"], "rows": rows}]
    why = explanation_section(metrics, config)
    if why is not None:
        out.insert(0, why)
    if metrics.get("unfinished"):
        items = metrics.get("unfinished_items", {})
        out.append({"title": "Unfinished items", "text": f"{metrics['unfinished']} item(s) were left unfinished "
                    "(an outage, a lost worker or a bug); rerun the same command to finish them.",
                    "headers": ["item", "reason"], "rows": [[k, v[:200]] for k, v in list(items.items())[:50]]})
    return out


def preflight_config(cfg: Any) -> None:
    """One cheap request to every LLM endpoint (:func:`agentrag.llm.preflight.preflight_llm`) and
    to the retrieval server (:func:`agentrag.kb.reference.check_retriever`) a synthesizer's config
    names: a dead endpoint or a refused key is one UserError line, in seconds."""
    from agentrag.kb.reference import check_retriever, is_kb_url, resolve_retriever
    from agentrag.llm.preflight import preflight_llm
    from agentrag.llm.reference import config_llm_refs

    for _key, ref in config_llm_refs(cfg):
        preflight_llm(ref)
    kb = getattr(cfg, "kb", None)
    if isinstance(kb, str) and is_kb_url(kb):
        check_retriever(resolve_retriever(kb))


def run_synthesizer(synth: Synthesizer[Any, Any, Any], cfg: Any, out: str | os.PathLike[str], *,
                    progress: ProgressArg = None, executor: Executor | None = None,
                    preflight: bool = False, **given: Any) -> dict[str, Any]:
    """Run ``synth`` into the run directory ``out`` (rerun = resume); returns ``metrics.json``'s
    object. With ``preflight`` (the CLI's default) every LLM endpoint and retrieval server the
    config names gets one cheap request after the input checks and before anything is written
    (:func:`preflight_config`). Raises :class:`SynthBugs` (after writing metrics and report) when
    items hit a bug. ``progress``: see :mod:`agentrag.progress` (default: heartbeat lines on
    stderr when the session is interactive)."""
    unknown = sorted(set(given) - set(synth.given))
    if unknown:
        raise UserError(f"run_{synth.name}: unknown argument(s) {', '.join(unknown)}; the objects it takes: "
                        f"{', '.join(synth.given)}")
    inputs = synth.check_inputs(cfg, out, given)
    if preflight:  # endpoints answer, after the local inputs, before writing
        preflight_config(cfg)
    passive_openmp()
    with RunDir(out) as run, progress_for(progress) as beat:
        run.write_config(cfg)
        made: dict[int, Any] = {}  # LLM backends passed as objects go behind the run's cache, as references do
        given = {k: with_response_cache(v, run.file("llm_cache.sqlite"), made) for k, v in given.items()}
        comps = synth.components(cfg, run, inputs, given)
        llms = list(synth.llm_roles(comps).values())
        width = synth.concurrency(cfg)
        if getattr(cfg, "concurrency", 0) is None and given:  # the default follows LLM objects passed in too
            width = max(width, default_items_in_flight(*llms))
        in_flight = link_request_limits(llms, width)  # one setting: the endpoints' request limit
        ctx = SynthRun(run, executor or ThreadExecutor(in_flight), beat)
        start = time.monotonic()
        output = run_or_reuse(synth, ctx, cfg, comps, inputs)
        metrics = finish_run(synth, cfg, ctx, comps, output, time.monotonic() - start)
    bugs = {k: v for r in ctx.results.values() for k, v in r.bugs.items()}
    if bugs:
        raise SynthBugs(bugs, metrics)
    return metrics


__all__ = ["Stage", "FunnelRow", "SynthMetrics", "SynthOutput", "SynthRun", "SynthBugs", "Synthesizer",
           "Pipeline", "PendingStage", "PipelineStep", "run_pipeline", "run_or_reuse", "ids_key", "run_synthesizer", "preflight_config", "funnel_rows", "finish_run", "run_sections"]
