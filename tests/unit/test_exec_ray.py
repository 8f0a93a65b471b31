"""The Ray executor on a local 2-CPU Ray instance: `agentrag eval` and RAGShaper give the thread
executor's records (modulo timing) although a worker is killed mid-run; nothing lost or duplicated.

One Ray session for the module (Ray starts slowly on a shared 2-core machine).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_ragshaper_support import ShaperRun, curator_llm, main_retriever, teacher_llm
from typer.testing import CliRunner

import agentrag
from agentrag.cli.main import app
from agentrag.errors import UserError
from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.records import Passage
from agentrag.runs import RunDir
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.testing import CrashOnceLLM, FakeRetriever, HashEmbedder, StubOpenAIServer
from extras_check import require_module

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
TIMING = ("elapsed", "latency", "latency_s", "backend_latency_s", "created")


@pytest.fixture(scope="module")
def ray_session():
    ray = require_module("ray", "ray")
    # workers import this checkout's agentrag and the test helpers
    paths = [str(Path(agentrag.__file__).parents[1]), str(HERE), str(HERE.parent)]  # + tests/ (extras_check)
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in TIMING}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _records(path: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"duplicated ids in {path}"
    return {r["id"]: _strip(r) for r in rows}


# --- the executor itself ---------------------------------------------------------------------
def _dies_on_one(x: int) -> int:
    if x == 1:
        os._exit(3)
    if x == 2:
        raise ValueError("two")
    return x * 10


def test_lost_worker_after_retries_is_a_retryable_error(ray_session):
    from agentrag.exec.ray_executor import RayExecutor, WorkerLost

    ex = RayExecutor(workers=2, retries=0, max_in_flight=2)  # one item per worker at a time
    outs = {o.item: o for o in ex.map(_dies_on_one, range(6))}
    ex.close()  # attached to the fixture's instance: leaves it running
    assert ray_session.is_initialized()
    assert sorted(outs) == list(range(6))
    assert isinstance(outs[1].error, WorkerLost) and outs[1].error.is_retryable
    assert isinstance(outs[2].error, ValueError)
    assert {i: outs[i].result for i in (0, 3, 4, 5)} == {0: 0, 3: 30, 4: 40, 5: 50}


def test_missing_ray_names_the_extra(monkeypatch):
    from agentrag.exec import resolve_executor

    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delitem(sys.modules, "agentrag.exec.ray_executor", raising=False)
    with pytest.raises(UserError, match=r"agentrag\[ray\]"):
        resolve_executor("ray", 2)


# --- agentrag eval ---------------------------------------------------------------------------
def _agent_reply(body: dict[str, Any]) -> dict[str, Any]:
    msgs = body["messages"]
    tool_msgs = [m for m in msgs if m["role"] == "tool"]
    if tool_msgs:  # an answer that depends on the passages read: deterministic per question
        word = hashlib.sha1((tool_msgs[-1]["content"] or "").encode()).hexdigest()[:8]
        return {"content": f"<answer>{word}</answer>"}
    tool = body["tools"][0]["function"]["name"]
    question = next(m["content"] for m in msgs if m["role"] == "user")
    return {"tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": tool, "arguments": json.dumps({"query": question})}}]}


@pytest.fixture(scope="module")
def bm25_kb(tmp_path_factory, data_dir):
    from agentrag.kb.ingest import pooled_passages

    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    root = tmp_path_factory.mktemp("raykb")
    sub = root / "sub.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(next(fh) for _ in range(6)), encoding="utf-8")
    KnowledgeBase.build(pooled_passages([sub]), root / "kb", KBConfig(method="bm25"), embedder=HashEmbedder(),
                        progress=False)
    return sub, root / "kb"


def _eval(out: Path, dataset: Path, kb: Path, url: str, *extra: str) -> None:
    res = CliRunner().invoke(app, ["eval", "--dataset", str(dataset), "--kb", str(kb), "--agent", "react",
                                   "--llm", f"openai:stub@{url}", "-j", "2", "--out", str(out),
                                   "--set", "agent_config.max_steps=3", *extra])
    assert res.exit_code == 0, res.output


def test_eval_on_ray_equals_threads_despite_a_killed_worker(ray_session, bm25_kb, tmp_path):
    dataset, kb = bm25_kb
    with StubOpenAIServer(reply=_agent_reply) as stub:
        _eval(tmp_path / "thread", dataset, kb, stub.base_url)
    with StubOpenAIServer(reply=_agent_reply, kill_client_at=4) as stub:
        _eval(tmp_path / "ray", dataset, kb, stub.base_url, "--executor", "ray", "--workers", "2")
        assert len(stub.killed) == 1  # a worker process died mid-call and was replaced
    threads, rays = _records(tmp_path / "thread" / "results.jsonl"), _records(tmp_path / "ray" / "results.jsonl")
    assert len(threads) == 6 and rays == threads
    assert len({r["prediction"] for r in rays.values()}) > 1
    metrics = json.loads((tmp_path / "ray" / "metrics.json").read_text())
    assert metrics["n"] == 6 and metrics["missing"] == 0
    assert (tmp_path / "ray" / "llm_cache.sqlite").exists()  # the workers wrote the run's cache

    with StubOpenAIServer(reply=_agent_reply) as stub:  # resume: nothing left, no call paid
        _eval(tmp_path / "ray", dataset, kb, stub.base_url, "--executor", "ray", "--workers", "2")
        assert stub.requests == 0


# --- RAGShaper -------------------------------------------------------------------------------
def _fake_tilde(passages: list[Passage]) -> FakeRetriever:
    # distractors.jsonl is in completion order (varies run to run with any concurrent executor);
    # sort so that the fake's ties break the same way in both runs
    return FakeRetriever(sorted(passages, key=lambda p: p.id), kb="distractor")


@dataclass
class FakeWorld:
    """Picklable recipe of the fake RAGShaper world; with ``marker`` the curator kills its worker
    process once, on its 3rd call."""

    marker: str | None = None

    def __call__(self) -> RagShaperComponents:
        curator: Any = curator_llm()
        if self.marker:
            curator = CrashOnceLLM(curator, self.marker, at_call=3)
        return RagShaperComponents(curator=curator, teacher=teacher_llm(), main_kb=main_retriever(),
                                   distractor_kb=_fake_tilde, tagger=curator_llm(), rebuild=self)


def _ragshaper(out: Path, executor: Any, marker: str | None = None) -> None:
    cfg = RagShaperConfig(concurrency=2)
    cfg.curator.max_depth = 4
    comps = FakeWorld()()
    comps.rebuild = FakeWorld(marker)
    ShaperRun(RunDir(out), cfg, comps, executor=executor).run(["Ada Varn", "Ott Brem", "Lysa", "Orn bridge"])


def test_ragshaper_on_ray_equals_threads_despite_a_killed_worker(ray_session, tmp_path):
    from agentrag.exec import ThreadExecutor
    from agentrag.exec.ray_executor import RayExecutor

    _ragshaper(tmp_path / "thread", ThreadExecutor(2))
    marker = tmp_path / "died"
    _ragshaper(tmp_path / "ray", RayExecutor(workers=2), str(marker))
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker, not the driver, died
    for stage in ("seeds", "trees", "distractors", "paths", "qa", "trajectories", "filter", "tags"):
        threads = _records(tmp_path / "thread" / f"{stage}.jsonl")
        rays = _records(tmp_path / "ray" / f"{stage}.jsonl")
        assert rays == threads, stage
        if stage in ("trees", "qa", "trajectories", "tags"):
            assert threads, stage


def test_components_builder_pickles_and_rebuilds_from_the_config(bm25_kb, tmp_path):
    import pickle

    from agentrag.synth.ragshaper.build import RagShaperRecipe
    from agentrag.synth.ragshaper.config import RagShaperRunConfig

    _, kb = bm25_kb
    cfg = RagShaperRunConfig(kb=str(kb), seeds="2", llm="openai:m@http://127.0.0.1:9/v1",
                             tagger="openai:t@http://127.0.0.1:9/v1")
    builder = pickle.loads(pickle.dumps(RagShaperRecipe.from_config(cfg, tmp_path / "run")))
    comps = builder()
    assert comps.rebuild == builder and comps.curator is comps.teacher and comps.tagger is not comps.curator
    assert comps.tagger.model == "t" and len(comps.main_kb) > 0
    assert str(comps.curator.cache.path) == str(tmp_path / "run" / "llm_cache.sqlite")  # the run's cache
    assert comps.open_distractor_kb.directory == str(tmp_path / "run" / "distractor_kb")


def test_worker_cache_is_the_runs_unless_a_node_local_dir_is_set(tmp_path, monkeypatch):
    import socket

    from agentrag.llm.cache import worker_cache_path

    run_cache = tmp_path / "run1" / "llm_cache.sqlite"
    monkeypatch.delenv("AGENTRAG_WORKER_CACHE_DIR", raising=False)
    assert worker_cache_path(run_cache) == str(run_cache) and worker_cache_path(None) is None
    monkeypatch.setenv("AGENTRAG_WORKER_CACHE_DIR", str(tmp_path / "local"))
    assert worker_cache_path(run_cache) == str(tmp_path / "local" / f"run1-{socket.gethostname()}.sqlite")


# --- EviPath, ReasonRAG, Tracer: their pipelines on Ray equal the thread executor's ----------------
def _same_stages(a: Path, b: Path, stages: tuple[str, ...], nonempty: tuple[str, ...]) -> None:
    for stage in stages:
        threads, rays = _records(a / f"{stage}.jsonl"), _records(b / f"{stage}.jsonl")
        assert rays == threads, stage
        if stage in nonempty:
            assert threads, stage


def _crash_once(llm: Any, marker: str | None) -> Any:
    return CrashOnceLLM(llm, marker, at_call=3) if marker else llm


def _thread_then_ray(tmp_path: Path, run: Any) -> None:
    """``run(out, executor, marker)`` on 2 threads, then on 2 Ray workers, one of which dies once."""
    from agentrag.exec import ThreadExecutor
    from agentrag.exec.ray_executor import RayExecutor

    run(tmp_path / "thread", ThreadExecutor(2), None)
    marker = tmp_path / "died"
    ex = RayExecutor(workers=2)
    try:
        run(tmp_path / "ray", ex, str(marker))
    finally:
        ex.close()
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker, not the driver, died


@dataclass
class EviWorld:
    """Picklable recipe of the fake EviPath world (MuSiQue's gold decompositions play every role)."""

    dataset: str
    n: int
    marker: str | None = None

    def __call__(self) -> Any:
        from agentrag.synth.evipath import EviPathComponents
        from agentrag.testing import GoldDecompositionLLM

        rows = [json.loads(line) for line in Path(self.dataset).read_text().splitlines()[:self.n]]
        llm = _crash_once(GoldDecompositionLLM(rows), self.marker)
        return EviPathComponents(planner=llm, executor=llm, embedder=HashEmbedder(), rebuild=self)


def test_evipath_on_ray_equals_threads_despite_a_killed_worker(ray_session, data_dir, tmp_path):
    from agentrag.synth.evipath import EviPathRunConfig, run_evipath

    dataset = str(data_dir / "musique" / "train_100.jsonl")

    def run(out: Path, executor: Any, marker: str | None) -> None:
        comps = EviWorld(dataset, 4)()
        run_evipath(EviPathRunConfig(datasets=[dataset], limit=4, concurrency=2), out, executor=executor,
                    planner=comps.planner, embedder=comps.embedder, rebuild=EviWorld(dataset, 4, marker))

    _thread_then_ray(tmp_path, run)
    _same_stages(tmp_path / "thread", tmp_path / "ray",
                 ("items", "plans", "iterations", "sub_answers", "selections", "gates", "conversations"),
                 ("plans", "iterations", "selections", "gates"))


@dataclass
class ReasonWorld:
    """Picklable recipe of the fake ReasonRAG world (test_reasonrag_pipeline's policy and passages)."""

    marker: str | None = None

    def __call__(self) -> Any:
        from test_reasonrag_pipeline import policy, retriever

        from agentrag.synth.reasonrag.pipeline import ReasonRagComponents
        from agentrag.testing import ScriptedLLM

        return ReasonRagComponents(llm=_crash_once(ScriptedLLM(default=policy), self.marker), retriever=retriever(),
                                   rebuild=self)


def test_reasonrag_on_ray_equals_threads_despite_a_killed_worker(ray_session, tmp_path):
    from test_reasonrag_pipeline import QUESTION, config

    from agentrag.synth.reasonrag import run_reasonrag

    questions = [QUESTION, QUESTION.model_copy(update={"id": "q2"})]
    cfg = config(concurrency=2)
    cfg.mcts.iterations = 4

    def run(out: Path, executor: Any, marker: str | None) -> None:
        comps = ReasonWorld()()
        comps.rebuild = ReasonWorld(marker)
        metrics = run_reasonrag(cfg, out, executor=executor, components=comps, questions=questions)
        assert metrics["unfinished"] == 0

    _thread_then_ray(tmp_path, run)
    _same_stages(tmp_path / "thread", tmp_path / "ray", ("questions", "events", "trees", "greedy", "pairs"),
                 ("events", "trees", "greedy"))
    assert len(_records(tmp_path / "ray" / "trees.jsonl")) == 2


@dataclass
class TracerWorld:
    """Picklable recipe of the fake Tracer world (tracer_support's passages, routing LLM and judge)."""

    marker: str | None = None

    def __call__(self) -> Any:
        from tracer_support import PASSAGES, judge_llm, world_llm

        from agentrag.synth.tracer import TracerComponents

        return TracerComponents(llm=_crash_once(world_llm(), self.marker), judge=judge_llm(), kb=FakeRetriever(PASSAGES),
                                passages=PASSAGES, excluded_titles=frozenset({"excluded title"}), rebuild=self)


def test_tracer_on_ray_equals_threads_despite_a_killed_worker(ray_session, tmp_path):
    from tracer_support import run_config

    from agentrag.synth.tracer import run_tracer

    cfg = run_config(tmp_path / "run")
    cfg.concurrency = 2

    def run(out: Path, executor: Any, marker: str | None) -> None:
        comps = TracerWorld()()
        metrics = run_tracer(cfg, out, executor=executor, llm=comps.llm, judge=comps.judge, kb=comps.kb,
                             passages=comps.passages, rebuild=TracerWorld(marker))
        assert metrics["unfinished"] == 0

    _thread_then_ray(tmp_path, run)
    _same_stages(tmp_path / "thread", tmp_path / "ray", ("docs", "atomic", "hop2", "hop3", "hop4", "benchmark"),
                 ("docs", "atomic", "hop2", "hop3", "hop4"))


def test_synth_builders_pickle_and_rebuild_from_the_config(bm25_kb, tmp_path):
    import pickle

    from agentrag.synth.evipath.run import EviPathRecipe
    from agentrag.synth.reasonrag.run import ReasonRagRecipe
    from agentrag.synth.tracer.run import TracerRecipe

    _, kb = bm25_kb
    run, cache = tmp_path / "run", str(tmp_path / "run" / "llm_cache.sqlite")
    m, j = "openai:m@http://127.0.0.1:9/v1", "openai:j@http://127.0.0.1:9/v1"

    def rebuilt(builder: Any) -> Any:
        copy = pickle.loads(pickle.dumps(builder))
        comps = copy()
        assert comps.rebuild == builder
        return comps

    evi = rebuilt(EviPathRecipe(llm=m, executor_llm=None, kb=str(kb), embedder=None, run_dir=str(run)))
    assert evi.planner is evi.executor and str(evi.planner.cache.path) == cache and len(evi.retriever) > 0
    rr = rebuilt(ReasonRagRecipe(llm=m, judge=j, kb=str(kb), run_dir=str(run)))
    assert rr.llm.model == "m" and rr.judge.model == "j" and str(rr.judge.cache.path) == cache
    assert rebuilt(ReasonRagRecipe(llm=m, judge=m, kb=str(kb), run_dir=str(run))).judge is None  # = the policy
    tr = rebuilt(TracerRecipe(llm=m, judge=None, kb=str(kb), run_dir=str(run), excluded_titles=("x",)))
    assert tr.llm is tr.judge and len(tr.kb) > 0 and tr.excluded_titles == frozenset({"x"}) and tr.passages == ()


@pytest.mark.parametrize("command", ["evipath", "reasonrag", "tracer"])
def test_synth_commands_take_the_executor_options(command):
    res = CliRunner().invoke(app, ["synth", command, "--help"], terminal_width=200)
    assert res.exit_code == 0
    assert all(opt in res.output for opt in ("--executor", "--ray-address", "--workers"))
