"""`run_ragshaper` is the one orchestration: a CLI run and a Python-API run write the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_ragshaper_support import PASSAGES, curator_llm, teacher_llm
from typer.testing import CliRunner

import agentrag.llm
from agentrag.cli.main import app
from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.llm.cache import CachedLLM
from agentrag.synth.ragshaper import RagShaperRunConfig, run_ragshaper
from agentrag.testing import HashEmbedder

runner = CliRunner()


@pytest.fixture()
def fakes(tmp_path: Path, monkeypatch) -> dict[str, object]:
    """A KB over the support passages (hash embedder) and scripted LLMs behind the run's real cache."""
    kb = tmp_path / "kb"
    KnowledgeBase.build(PASSAGES, kb, KBConfig(name="main"), embedder=HashEmbedder(32), progress=False)
    load = KnowledgeBase.load.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(KnowledgeBase, "load",
                        classmethod(lambda cls, d, **kw: load(cls, d, embedder=HashEmbedder(32), **kw)))
    made: list[tuple[str, object]] = []

    def resolve_llm(ref: str = "embedded", *, cache=None, **overrides):
        inner = teacher_llm() if ref == "teacher" else curator_llm()
        made.append((ref, cache))
        return CachedLLM(inner, cache)

    monkeypatch.setattr(agentrag.llm, "resolve_llm", resolve_llm)
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: None)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("Ada Varn\nOtt Brem\n")
    return {"kb": kb, "seeds": seeds, "made": made}


def test_cli_and_python_api_write_the_same_metrics(tmp_path: Path, fakes) -> None:
    cli_out, api_out = tmp_path / "cli", tmp_path / "api"
    res = runner.invoke(app, ["synth", "ragshaper", "--kb", str(fakes["kb"]), "--seeds", str(fakes["seeds"]),
                              "--llm", "curator", "--teacher", "teacher", "--out", str(cli_out),
                              "--set", "curator.max_depth=4"])
    assert res.exit_code == 0, res.output
    cfg = RagShaperRunConfig(kb=str(fakes["kb"]), seeds=str(fakes["seeds"]), llm="curator", teacher="teacher")
    cfg.curator.max_depth = 4
    returned = run_ragshaper(cfg, api_out)
    cli = json.loads((cli_out / "metrics.json").read_text())
    api = json.loads((api_out / "metrics.json").read_text())
    assert json.loads(json.dumps(returned, default=str)) == api
    assert set(cli) == set(api) and "llm" in api and "llm_calls" not in api
    assert set(api["llm"]) == {"curator+tagger", "teacher"}
    assert api["llm"]["teacher"]["misses"] > 0
    for key in ("funnel", "tool_calls", "distractors", "tags", "llm"):
        assert cli[key] == api[key], key
    # a seed's time (exploration + its longest QA + elicitation chain) fits in the run's wall time
    assert api["seconds_per_seed"] and all(s <= api["wall_s"] + 0.1 for s in api["seconds_per_seed"].values())
    assert [r["unit"] for r in api["funnel"]][:3] == ["seeds", "distractor tool calls", "trees"]
    assert (cli_out / "config.yaml").read_text() == (api_out / "config.yaml").read_text()
    # one backend per distinct reference, each behind the run's own response cache
    assert sorted(ref for ref, _ in fakes["made"]) == ["curator", "curator", "teacher", "teacher"]
    assert {str(c) for _, c in fakes["made"]} == {str(cli_out / "llm_cache.sqlite"), str(api_out / "llm_cache.sqlite")}


def test_cli_preset_with_executor_options_exits_3_on_an_outage_and_a_rerun_finishes(tmp_path: Path, fakes,
                                                                                   monkeypatch) -> None:
    """--preset and --executor/--workers together; an outage leaves items unfinished (exit 3), the
    same command against a healthy backend redoes them (exit 0)."""
    from agentrag.testing import OutageLLM

    down = {"teacher": True}

    def resolve_llm(ref: str = "embedded", *, cache=None, **overrides):
        inner = teacher_llm() if ref == "teacher" else curator_llm()
        return CachedLLM(OutageLLM(inner, down=down["teacher"]) if ref == "teacher" else inner, cache)

    monkeypatch.setattr(agentrag.llm, "resolve_llm", resolve_llm)
    out = tmp_path / "r"
    argv = ["synth", "ragshaper", "--kb", str(fakes["kb"]), "--seeds", str(fakes["seeds"]), "--llm", "curator",
            "--teacher", "teacher", "--out", str(out), "--preset", "demo", "--executor", "thread",
            "--workers", "2", "--set", "curator.max_depth=4"]
    res = runner.invoke(app, argv)
    assert res.exit_code == 3, res.output
    first = json.loads((out / "metrics.json").read_text())
    assert first["unfinished_by_stage"].get("elicit", 0) == first["unfinished"] > 0
    assert not (out / "trajectories.jsonl").exists() or not (out / "trajectories.jsonl").read_text().strip()
    down["teacher"] = False
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    again = json.loads((out / "metrics.json").read_text())
    assert again["unfinished"] == 0
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == first["unfinished_by_stage"]["elicit"]
