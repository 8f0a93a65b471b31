"""A synthesizer run that was faulted or killed and then resumed writes the same files, byte for
byte, as a run that was never interrupted: once every item is finished, each stage file is put in
input order (the records of one item together, items in the order they were given) and the
timings of its records (``elapsed``, a step's ``latency``) move to ``<stage>.timings.jsonl``;
reading the run puts them back. The exports, written from the finished stage files, follow; a run
resumed with four items in flight writes the files of an uninterrupted run of one at a time."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from test_fault_disk_synth import LLM_WORLDS, WORLDS
from test_fault_process import _argv, _spawn
from typer.testing import CliRunner

from agentrag.runs import JsonlStore, RunDir, input_order, read_records


class Timed(BaseModel):
    id: str
    text: str
    elapsed: float = 0.0

pytestmark = pytest.mark.timeout(400)

#: files that describe an invocation, not its data: metrics and reports (wall time, LLM usage),
#: caches, locks and state files; ``config.yaml`` names the test's per-run LLM file (the harness's)
NOT_DATA = {"llm_cache.sqlite", ".agentrag.lock", "metrics.json", "report.md", "report.html", ".derived.json",
            ".finished.json", ".stages.json", "unfinished.json", "config.yaml"}


def data_files(out: Path) -> dict[str, bytes]:
    """Every data file of a run directory but the timings side files (and the distractor KB's
    ``params.json``, which records when and how fast the KB was built, as every KB's does)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in NOT_DATA and not p.name.endswith(".timings.jsonl")
            and not p.name.startswith("llm_cache") and str(p.relative_to(out)) != "distractor_kb/params.json"}


def assert_same_files(got: Path, want: Path) -> None:
    a, b = data_files(got), data_files(want)
    assert sorted(a) == sorted(b)
    assert [name for name in a if a[name] != b[name]] == []
    stages = [n for n in a if "/" not in n and n.endswith(".jsonl") and (got / n.replace(".jsonl", ".timings.jsonl")).exists()]
    assert stages, sorted(a)
    for name in stages:  # the timings live in the side file, not in the stage file
        text = a[name].decode()
        assert '"elapsed":' not in text and '"latency":' not in text, name


def window_of_500s(srv, start: int, n: int = 2) -> None:
    """Requests ``start`` .. ``start + n - 1`` of the stub answer 500 (an outage: the item they
    belong to is left unfinished once the backend's retries are spent)."""
    real = srv._fault

    def fault(body):
        if start <= srv.requests < start + n:
            with srv._lock:
                srv.requests += 1
            return "500"
        return real(body)

    srv._fault = fault


def extra_args(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Arguments appended to every command the world runs from now (e.g. ``--set concurrency=4``)."""
    extra: list[str] = []
    real = CliRunner.invoke

    def invoke(self: CliRunner, app: Any, args: Any = None, **kwargs: Any) -> Any:
        return real(self, app, [*args, *extra], **kwargs)

    monkeypatch.setattr(CliRunner, "invoke", invoke)
    return extra


@pytest.mark.parametrize("jobs", [1, 4])
@pytest.mark.parametrize("world", LLM_WORLDS)
def test_a_run_resumed_after_an_outage_writes_the_files_of_an_uninterrupted_run(world, jobs, tmp_path, monkeypatch):
    extra = extra_args(monkeypatch)
    with WORLDS[world](tmp_path, monkeypatch) as (srv, run):
        res = run(tmp_path / "clean")  # the world's own setting: one item at a time
        assert res.exit_code == 0, res.output
        base = srv.requests
        extra[:] = ["--set", f"concurrency={jobs}"]  # the faulted run and its resume: items in flight at once
        real = srv._fault
        window_of_500s(srv, srv.requests + base // 2, 2 * jobs)
        out = tmp_path / "resumed"
        res = run(out)
        # one at a time, an item is left unfinished (its stage files are not final yet); with four in
        # flight the window may instead cost each of several items one retry
        assert res.exit_code == 3 or (jobs > 1 and res.exit_code == 0), res.output
        srv._fault = real
        res = run(out)
        assert res.exit_code == 0, res.output
    assert_same_files(out, tmp_path / "clean")


@pytest.mark.parametrize("world", LLM_WORLDS)
def test_a_run_killed_mid_run_and_resumed_writes_the_files_of_an_uninterrupted_run(world, tmp_path, monkeypatch):
    out = tmp_path / "killed"
    with WORLDS[world](tmp_path, monkeypatch) as (srv, run):
        res = run(tmp_path / "clean")
        assert res.exit_code == 0, res.output
        base, srv.requests = srv.requests, 0
        srv.kill_client_at = max(2, base // 2)
        proc = _spawn(world, _argv(run, out))
        output = proc.communicate(timeout=120)[0]
        assert proc.returncode == -signal.SIGKILL, output
        srv.kill_client_at = None
        res = run(out)
        assert res.exit_code == 0, res.output
    assert_same_files(out, tmp_path / "clean")


def test_annotated_writes_its_paths_without_timings_and_reads_them_back(tmp_path, monkeypatch):
    from agentrag.synth.annotated.run import PathRecord

    with WORLDS["annotated"](tmp_path, monkeypatch) as (_srv, run):
        for name in ("a", "b"):
            res = run(tmp_path / name)
            assert res.exit_code == 0, res.output
    assert_same_files(tmp_path / "a", tmp_path / "b")
    assert [r.id for r in read_records(tmp_path / "a" / "paths.jsonl", PathRecord)] == ["m1"]


def test_input_order_puts_each_item_s_records_at_its_place():
    pos = {k: i for i, k in enumerate(["q2", "q10", "q1", "s1"])}
    ids = ["q1:10", "q10", "q1", "q1:2", "zz", "q2-n3-qa", "q10-x", "q2", "s1.n2.d0", "q1x", "a"]
    assert input_order(ids, pos) == ["q2", "q2-n3-qa", "q10", "q10-x", "q1", "q1:2", "q1:10", "s1.n2.d0",
                                     "a", "q1x", "zz"]


def test_finish_stages_orders_and_splits_only_what_changed_since(tmp_path):
    def qa(k: str, elapsed: float) -> Timed:
        return Timed(id=k, text="q?", elapsed=elapsed)

    with RunDir(tmp_path / "r") as run:
        store = run.stage_file("qa", Timed)
        for k, t in (("s2-n1-qa", 0.5), ("s1-n3-qa", 1.5), ("s1-n2-qa", 2.5)):
            store.append(qa(k, t))
        assert run.finish_stages(["s1", "s2"]) == ["qa"]
        lines = store.path.read_text().splitlines()
        assert [json.loads(x)["id"] for x in lines] == ["s1-n2-qa", "s1-n3-qa", "s2-n1-qa"]
        assert all('"elapsed"' not in x for x in lines)
        assert {r.id: r.elapsed for r in JsonlStore(store.path, Timed)} == \
            {"s2-n1-qa": 0.5, "s1-n3-qa": 1.5, "s1-n2-qa": 2.5}
        assert run.finish_stages(["s1", "s2"]) == []  # nothing changed since: not read
        store.append(qa("s0-n1-qa", 3.5))  # a later run's item, appended to the finished file
        assert run.finish_stages(["s0", "s1", "s2"]) == ["qa"]
        assert [r.id for r in JsonlStore(store.path, Timed)] == ["s0-n1-qa", "s1-n2-qa", "s1-n3-qa", "s2-n1-qa"]
        assert {r.id: r.elapsed for r in store}["s0-n1-qa"] == 3.5
