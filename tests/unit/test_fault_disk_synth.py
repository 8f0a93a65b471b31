"""Every synthesizer on a full disk (simulated, :mod:`disk_faults`): the LLM cache full at start
and mid-run, a stage file full mid-run, the report at the end: one error line naming the file and
the disk, exit 2, no traceback; after space is freed the rerun finishes and pays no request
twice (the one reply still in memory when a run stopped on a full cache is the only exception,
and it is said in the error line)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from disk_faults import FullDisk
from test_fault_disk import disk_error_line
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import EXIT_BAD_INPUT
from agentrag.testing import StubOpenAIServer

pytestmark = pytest.mark.timeout(240)

SHARED = Path(os.environ.get("AGENTRAG_SHARED", Path(__file__).resolve().parents[3] / "shared"))
#: a synthesizer world: yields (stub, run(out) -> CliRunner result)
World = Callable[[Path, pytest.MonkeyPatch], Any]


def patch_reasonrag(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_reasonrag_pipeline import retriever

    import agentrag.kb

    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: retriever())


@contextmanager
def reasonrag(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StubOpenAIServer, Any]]:
    from test_reasonrag_faults import SETS, llm_yaml, reply
    from test_reasonrag_pipeline import QUESTION, fork_seed

    patch_reasonrag(monkeypatch)
    data = tmp / "q.jsonl"
    data.write_text(json.dumps(QUESTION.model_dump(include={"id", "question", "golden_answers"})) + "\n")
    sets = [x for s in [*SETS, f"seed={fork_seed()}"] for x in ("--set", s)]
    with StubOpenAIServer(reply=reply) as srv:
        llm = llm_yaml(tmp, srv.base_url)
        yield srv, lambda out: CliRunner().invoke(app, ["synth", "reasonrag", "--dataset", str(data), "--kb", "fake",
                                                        "--llm", str(llm), "--out", str(out), *sets])


def patch_evipath(monkeypatch: pytest.MonkeyPatch) -> None:
    from evipath_fakes import ContentWordEmbedder

    monkeypatch.setattr("agentrag.kb.embedders.load_embedder", lambda *a, **k: ContentWordEmbedder())


@contextmanager
def evipath(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StubOpenAIServer, Any]]:
    from test_evipath_faults import N, cli, gold_stub, llm_yaml

    patch_evipath(monkeypatch)
    musique = SHARED / "data" / "musique" / "train_100.jsonl"
    records = [json.loads(line) for line in musique.read_text().splitlines()[:N]]
    with gold_stub(records, []) as srv:
        llm = llm_yaml(tmp, srv.base_url)
        yield srv, lambda out: cli(out, musique, llm)


@contextmanager
def tracer(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StubOpenAIServer, Any]]:
    from test_tracer_faults import _cli
    from tracer_support import PASSAGES, stub_reply

    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.testing import HashEmbedder

    kb = tmp / "kb"
    if not kb.exists():  # one world per test: the baseline run and the faulted run share it
        KnowledgeBase.build(PASSAGES, kb, KBConfig(method="bm25"), embedder=HashEmbedder(), progress=False)
    with StubOpenAIServer(reply=stub_reply) as srv:
        yield srv, lambda out: _cli(out, kb, srv.base_url)


def patch_ragshaper(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentrag.testing import HashEmbedder

    load = _KB_LOAD
    monkeypatch.setattr(KnowledgeBase, "load",
                        classmethod(lambda cls, d, **kw: load(cls, d, embedder=HashEmbedder(32), **kw)))


@contextmanager
def ragshaper(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StubOpenAIServer, Any]]:
    from ragshaper_stub import WorldStub, build_kb, llm_yaml
    from test_ragshaper_faults import _argv

    kb = tmp / "kb" if (tmp / "kb").exists() else build_kb(tmp / "kb")
    patch_ragshaper(monkeypatch)
    seeds = tmp / "seeds.txt"
    seeds.write_text("Ada Varn\nOtt Brem\n")
    with WorldStub() as srv:
        llm = llm_yaml(tmp / "llm.yaml", srv.base_url)
        yield srv, lambda out: CliRunner().invoke(app, _argv({"kb": kb, "seeds": seeds}, llm, out))


@contextmanager
def annotated(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StubOpenAIServer, Any]]:
    """No LLM: the stub is idle and counts nothing."""
    from test_annotated_teacher import MUSIQUE, _passages, _write

    from agentrag.kb import KBConfig
    from agentrag.testing import HashEmbedder

    kb = tmp / "kb"
    if not kb.exists():
        KnowledgeBase.build(_passages(), kb, KBConfig(method="bm25"), embedder=HashEmbedder(), progress=False)
    data = _write(tmp, "mus_train.jsonl", [MUSIQUE])
    with StubOpenAIServer() as srv:
        yield srv, lambda out: CliRunner().invoke(app, ["synth", "annotated", "--dataset", data, "--kb", str(kb),
                                                        "--out", str(out)])


from agentrag.kb import KnowledgeBase  # noqa: E402

_KB_LOAD = KnowledgeBase.load.__func__  # type: ignore[attr-defined]

WORLDS = {"reasonrag": reasonrag, "evipath": evipath, "tracer": tracer, "ragshaper": ragshaper,
          "annotated": annotated}
#: what each world patches in the process that runs the command (a subprocess applies it too)
PATCHES: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "reasonrag": patch_reasonrag, "evipath": patch_evipath, "ragshaper": patch_ragshaper,
    "tracer": lambda monkeypatch: None, "annotated": lambda monkeypatch: None}
LLM_WORLDS = [w for w in WORLDS if w != "annotated"]


def _healthy_requests(world: str, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    with WORLDS[world](tmp, monkeypatch) as (srv, run):
        res = run(tmp / "baseline")
        assert res.exit_code == 0, res.output
        return srv.requests


@pytest.mark.parametrize("world", list(WORLDS))
@pytest.mark.parametrize("name", ["report.md", "metrics.json.tmp"])
def test_report_on_a_full_disk_is_one_line_and_the_rerun_pays_nothing(world, name, tmp_path, monkeypatch):
    baseline = _healthy_requests(world, tmp_path, monkeypatch)
    out = tmp_path / "run"
    with WORLDS[world](tmp_path, monkeypatch) as (srv, run):
        disk = FullDisk(monkeypatch, files=lambda n: n in (name, name + ".tmp"))
        res = run(out)
        assert res.exit_code == EXIT_BAD_INPUT, res.output
        disk_error_line(res.output, name.removesuffix(".tmp"), "the disk is full")
        disk.full = False
        res = run(out)
        assert res.exit_code == 0, res.output
        assert srv.requests == baseline  # the finished work was kept: nothing asked twice
    assert (out / "report.md").exists()


@pytest.mark.parametrize("world", LLM_WORLDS)
def test_cache_full_at_start_stops_before_any_request(world, tmp_path, monkeypatch):
    with WORLDS[world](tmp_path, monkeypatch) as (srv, run):
        FullDisk(monkeypatch, cache=True)
        res = run(tmp_path / "run")
        assert srv.requests == 0
    assert res.exit_code == EXIT_BAD_INPUT, res.output
    disk_error_line(res.output, "llm_cache.sqlite", "the disk is full")


@pytest.mark.parametrize("world", LLM_WORLDS)
def test_cache_full_mid_run_stops_at_once_and_the_rerun_pays_at_most_the_held_reply(world, tmp_path, monkeypatch):
    baseline = _healthy_requests(world, tmp_path, monkeypatch)
    out = tmp_path / "run"
    with WORLDS[world](tmp_path, monkeypatch) as (srv, run):
        disk = FullDisk(monkeypatch, cache=True, full=False)
        real_reply = srv.reply

        def fill_disk(body: dict[str, Any]) -> Any:
            disk.full = True
            return real_reply(body)

        srv.reply = fill_disk
        res = run(out)
        assert res.exit_code == EXIT_BAD_INPUT, res.output
        disk_error_line(res.output, "llm_cache.sqlite", "the disk is full", "held in memory")
        assert srv.requests == 1  # concurrency 1: no request after the one the disk could not keep
        disk.full = False
        srv.reply = real_reply
        res = run(out)
        assert res.exit_code == 0, res.output
        assert srv.requests <= baseline + 1


@pytest.mark.parametrize("world", LLM_WORLDS)
def test_a_stage_file_full_mid_run_is_one_line_and_the_rerun_pays_nothing_twice(world, tmp_path, monkeypatch):
    baseline = _healthy_requests(world, tmp_path, monkeypatch)
    out = tmp_path / "run"
    with WORLDS[world](tmp_path, monkeypatch) as (srv, run):
        disk = FullDisk(monkeypatch, files=lambda n: n.endswith(".jsonl"), full=False)
        real_reply = srv.reply

        def fill_disk(body: dict[str, Any]) -> Any:  # the first reply's record finds the disk full
            disk.full = True
            return real_reply(body)

        srv.reply = fill_disk
        res = run(out)
        assert res.exit_code == EXIT_BAD_INPUT, res.output
        line = disk_error_line(res.output, "the disk is full", str(out))
        assert ".jsonl" in line, line
        assert srv.requests < baseline  # stopped at the first record the disk refused (its item's calls made)
        disk.full = False
        srv.reply = real_reply
        res = run(out)
        assert res.exit_code == 0, res.output
        assert srv.requests <= baseline  # the reply was cached before its record failed: not paid twice


def test_annotated_stage_file_full_is_one_line_and_the_rerun_finishes(tmp_path, monkeypatch):
    """synth annotated calls no LLM: its stage file refused by a full disk, then space freed."""
    out = tmp_path / "run"
    with WORLDS["annotated"](tmp_path, monkeypatch) as (_srv, run):
        disk = FullDisk(monkeypatch, files=lambda n: n == "paths.jsonl")
        res = run(out)
        assert res.exit_code == EXIT_BAD_INPUT, res.output
        disk_error_line(res.output, "paths.jsonl", "the disk is full")
        assert (out / "paths.jsonl").read_text() == ""  # no torn line left behind
        disk.full = False
        res = run(out)
        assert res.exit_code == 0, res.output
    assert [json.loads(x)["id"] for x in (out / "paths.jsonl").read_text().splitlines()] == ["m1"]
