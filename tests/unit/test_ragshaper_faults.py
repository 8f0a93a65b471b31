"""RAGShaper under the one failure policy, through a fault-injecting HTTP endpoint (not in-process
fakes): a 401 stops the run with nothing written as finished (exit 2) and a healthy rerun pays
its calls; an outage (500s, a 200 that is not a valid completion) leaves items unfinished (exit 3)
and a rerun finishes them; a request over the context window is a flagged record; a bug is exit
1 with the item unfinished. Also: the driver's typed metrics (funnel rows, one LLM block)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ragshaper_stub import WorldStub, build_kb, kind, llm_yaml
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import EndpointError
from agentrag.kb import KnowledgeBase
from agentrag.synth.driver import SynthBugs
from agentrag.synth.ragshaper import RagShaperRunConfig, run_ragshaper
from agentrag.testing import HashEmbedder

runner = CliRunner()


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    kb = build_kb(tmp_path / "kb")
    load = KnowledgeBase.load.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(KnowledgeBase, "load",
                        classmethod(lambda cls, d, **kw: load(cls, d, embedder=HashEmbedder(32), **kw)))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("Ada Varn\nOtt Brem\n")
    return {"kb": kb, "seeds": seeds}


def _argv(world: dict[str, Any], llm: Path, out: Path) -> list[str]:
    return ["synth", "ragshaper", "--kb", str(world["kb"]), "--seeds", str(world["seeds"]), "--llm", str(llm),
            "--out", str(out), "--set", "curator.max_depth=3", "--set", "concurrency=1"]


def _cfg(world: dict[str, Any], llm: Path) -> RagShaperRunConfig:
    cfg = RagShaperRunConfig(kb=str(world["kb"]), seeds=str(world["seeds"]), llm=str(llm), concurrency=1)
    cfg.curator.max_depth = 3
    return cfg


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _finished(out: Path) -> dict[str, int]:
    return {s: len(_lines(out / f"{s}.jsonl")) for s in ("trees", "qa", "trajectories", "filter", "tags")}


NOTHING = {"trees": 0, "qa": 0, "trajectories": 0, "filter": 0, "tags": 0}


def test_401_stops_the_run_writes_nothing_finished_and_a_healthy_rerun_pays_its_calls(world, tmp_path) -> None:
    out = tmp_path / "r"
    with WorldStub(fault_for=lambda body: "401") as bad:
        with pytest.raises(EndpointError):
            run_ragshaper(_cfg(world, llm_yaml(tmp_path / "bad.yaml", bad.base_url)), out)
        assert bad.requests >= 1
    assert _finished(out) == NOTHING  # no "ok" tree of error nodes, no llm_error rejection
    with WorldStub(fault_for=lambda body: "401") as bad:
        res = runner.invoke(app, _argv(world, llm_yaml(tmp_path / "bad.yaml", bad.base_url), out))
    assert res.exit_code == 2, res.output
    assert _finished(out) == NOTHING
    with WorldStub() as healthy:
        res = runner.invoke(app, _argv(world, llm_yaml(tmp_path / "ok.yaml", healthy.base_url), out))
        assert res.exit_code == 0, res.output
        assert healthy.requests > 0  # not a silently empty run
    done = _finished(out)
    assert done["trees"] == 2 and done["qa"] > 0 and done["trajectories"] > 0


@pytest.mark.parametrize("fault", ["500", "content_null"])
def test_outage_leaves_items_unfinished_exit_3_and_a_rerun_finishes_them(world, tmp_path, fault: str) -> None:
    out, llm_file = tmp_path / "r", tmp_path / "llm.yaml"
    down = {"on": True}
    with WorldStub(fault_for=lambda body: fault if down["on"] and kind(body) == "teacher" else None) as srv:
        argv = _argv(world, llm_yaml(llm_file, srv.base_url), out)
        res = runner.invoke(app, argv)
        assert res.exit_code == 3, res.output
        m = json.loads((out / "metrics.json").read_text())
        accepted = [q for q in _lines(out / "qa.jsonl") if q["status"] == "accepted"]
        assert accepted and m["unfinished"] == len(accepted) == m["unfinished_by_stage"]["elicit"]
        assert next(r for r in m["funnel"] if r["stage"] == "elicit")["unfinished"] == len(accepted)
        assert _lines(out / "trajectories.jsonl") == []  # an outage is never a record
        down["on"] = False
        res = runner.invoke(app, argv)
        assert res.exit_code == 0, res.output
    again = json.loads((out / "metrics.json").read_text())
    assert again["unfinished"] == 0 and len(_lines(out / "trajectories.jsonl")) == len(accepted)


@pytest.mark.parametrize("where", ["qa_pair", "teacher"])
def test_context_window_is_a_flagged_record_not_unfinished(world, tmp_path, where: str) -> None:
    out = tmp_path / "r"
    with WorldStub(fault_for=lambda body: "context" if kind(body) == where else None) as srv:
        m = run_ragshaper(_cfg(world, llm_yaml(tmp_path / "llm.yaml", srv.base_url)), out)
    assert m["unfinished"] == 0
    qas = _lines(out / "qa.jsonl")
    if where == "qa_pair":
        assert qas and all(q["status"] == "rejected" and q["reason"].startswith("context_limit") for q in qas)
        assert next(r for r in m["funnel"] if r["stage"] == "qa")["rejected"] == {"context_limit": len(qas)}
    else:
        trajs = _lines(out / "trajectories.jsonl")
        assert trajs and len(trajs) == sum(q["status"] == "accepted" for q in qas)
        assert all(t["finish_reason"] == "context_limit" and t["metadata"]["error"].startswith("context_limit")
                   for t in trajs)
        assert next(r for r in m["funnel"] if r["stage"] == "elicit")["rejected"] == {"context_limit": len(trajs)}


def test_a_bug_is_exit_1_and_the_item_stays_unfinished(world, tmp_path, monkeypatch) -> None:
    import agentrag.synth.ragshaper.qa as qa

    def broken(*args: Any, **kw: Any) -> str:
        raise ValueError("a bug in the QA prompt")

    out, original = tmp_path / "r", qa.render_for_qa
    with WorldStub() as srv:
        llm = llm_yaml(tmp_path / "llm.yaml", srv.base_url)
        monkeypatch.setattr(qa, "render_for_qa", broken)
        with pytest.raises(SynthBugs):
            run_ragshaper(_cfg(world, llm), out)
        res = runner.invoke(app, _argv(world, llm, out))
        assert res.exit_code == 1, res.output
        m = json.loads((out / "metrics.json").read_text())
        paths = _lines(out / "paths.jsonl")
        assert _lines(out / "qa.jsonl") == [] and m["bugs"] == len(paths) == m["unfinished_by_stage"]["qa"] > 0
        monkeypatch.setattr(qa, "render_for_qa", original)
        res = runner.invoke(app, _argv(world, llm, out))
        assert res.exit_code == 0, res.output
    assert len(_lines(out / "qa.jsonl")) == len(paths)


def test_metrics_are_the_drivers_typed_ones(world, tmp_path) -> None:
    out = tmp_path / "r"
    with WorldStub() as srv:
        returned = run_ragshaper(_cfg(world, llm_yaml(tmp_path / "llm.yaml", srv.base_url)), out)
    m = json.loads((out / "metrics.json").read_text())
    assert m == json.loads(json.dumps(returned))
    assert m["synthesizer"] == "ragshaper" and m["unfinished"] == 0 and m["bugs"] == 0 and "llm_calls" not in m
    assert [r["stage"] for r in m["funnel"]] == ["explore", "distractors", "paths", "qa", "elicit", "filter", "tag",
                                                  "export"]
    for row in m["funnel"]:
        assert {"stage", "input", "output", "in", "out", "rejected", "unfinished"} <= set(row)
    assert set(m["llm"]) == {"curator+teacher+tagger"} and m["llm"]["curator+teacher+tagger"]["misses"] > 0
    assert m["funnel_notes"]["explore"]["nodes"] > 0 and m["tool_calls"] and m["distractors"]["created"]
    report = (out / "report.md").read_text()
    assert "## Funnel" in report and "## LLM usage" in report and "curator+teacher+tagger" in report


def test_python_api_takes_llm_and_retriever_objects(tmp_path) -> None:
    from test_ragshaper_support import main_retriever

    from agentrag.llm import resolve_llm

    with WorldStub() as srv:
        llm = resolve_llm(str(llm_yaml(tmp_path / "llm.yaml", srv.base_url)))
        cfg = RagShaperRunConfig(concurrency=1)  # no kb, no seeds, no --llm: all given as objects
        cfg.curator.max_depth = 3

        def kb_tilde(passages: list[Any]) -> Any:
            from agentrag.testing import FakeRetriever

            return FakeRetriever(passages, kb="distractor")

        m = run_ragshaper(cfg, tmp_path / "r", llm=llm, main_kb=main_retriever(), distractor_kb=kb_tilde,
                          seeds=["Ada Varn"])
        assert srv.requests > 0
    assert m["unfinished"] == 0 and next(r for r in m["funnel"] if r["stage"] == "elicit")["out"] > 0
