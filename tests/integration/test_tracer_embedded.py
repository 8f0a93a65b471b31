"""Tracer builder end to end on the embedded model over a small KB of shared MuSiQue passages, via
the CLI as a user runs it, then `agentrag eval --maxd` on what it exported.

A 135M model rarely writes a 2-hop question that survives the three-stage verification, so zero
exported items is a valid outcome: the eval then runs on a fixture of verified chains (written by
the builder on the scripted world of tests/unit/tracer_support.py). What must hold: no crash, an
honest funnel (every stage accounted for, every rejection with a reason), no exported item that
failed a gate, and a rerun that pays no LLM call again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app
from rerun_check import rerun_pays_nothing

pytestmark = [pytest.mark.slow, pytest.mark.integration]
FIXTURE = Path(__file__).parent / "data" / "tracer_verified_3hop.jsonl"
SETTINGS = ["compose.candidates_per_hop=1", "atomic.pairs_per_doc=2", "atomic.max_tokens=256", "concurrency=1"]


@pytest.fixture(scope="module")
def small_kb(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.kb.ingest import pooled_passages

    src = data_dir / "corpora" / "musique_train_passages_1890.jsonl"
    root = tmp_path_factory.mktemp("tracer_kb")
    sub = root / "musique_sub.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(next(fh) for _ in range(40)), encoding="utf-8")
    KnowledgeBase.build(pooled_passages([sub]), root / "kb", KBConfig(), progress=False)
    return root / "kb"


def _build(kb: Path, out: Path, data_dir: Path) -> dict[str, object]:
    args = ["synth", "tracer", "--kb", str(kb), "--llm", "embedded", "--docs", "2", "--max-hops", "2",
            "--out", str(out), "--exclude", str(data_dir / "hotpotqa" / "dev_distractor_200.jsonl")]
    for s in SETTINGS:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads((out / "metrics.json").read_text())


def test_embedded_build_then_eval(small_kb: Path, tmp_path: Path, data_dir: Path) -> None:
    from agentrag.synth.tracer import audit_exports

    out = tmp_path / "run"
    m = _build(small_kb, out, data_dir)
    funnel = {row["stage"]: row for row in m["funnel"]}  # type: ignore[attr-defined]
    assert funnel["select"]["out"] == 2
    for row in funnel.values():  # honest: whatever went in and did not come out has a reason
        assert row["in"] >= row["out"]
        if "select" not in row["stage"]:
            assert sum(row["rejected"].values()) == row["in"] - row["out"], row
    assert audit_exports(out) == []
    for stage in ("docs", "atomic", "hop2"):
        assert (out / f"{stage}.jsonl").exists()
    stats = m["llm"]["llm+judge"]  # type: ignore[index]  # one LLM plays both roles
    # the rerun resumes: no new LLM call reaches the model
    m2 = rerun_pays_nothing(out, lambda: _build(small_kb, out, data_dir))
    assert m2["funnel"] == m["funnel"] and stats["inner_calls"] > 0  # type: ignore[index]

    exported = out / "benchmark.jsonl"
    dataset = exported if exported.read_text().strip() else FIXTURE
    res = CliRunner().invoke(app, ["eval", "--dataset", str(dataset), "--kb", str(small_kb), "--agent", "react",
                                   "--llm", "embedded", "--out", str(tmp_path / "eval"), "-j", "1", "--limit", "1",
                                   "--maxd", "--set", "agent_config.max_steps=2", "--set", "agent_config.top_k=2",
                                   "--set", "agent_config.max_top_k=2"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    rows = [json.loads(x) for x in (tmp_path / "eval" / "results.jsonl").read_text().splitlines()]
    main = [r for r in rows if r.get("parent_id") is None]
    probes = [r for r in rows if r.get("parent_id") is not None]
    assert len(main) == 1 and len(probes) == main[0]["hops"] - 1
    assert sorted(p["level"] for p in probes) == list(range(1, main[0]["hops"]))
    by_hops = metrics["hops"]["by_hops"][str(main[0]["hops"])]
    assert by_hops["n"] == 1 and by_hops["maxd_n"] == 1 and 0 <= by_hops["maxd"] <= main[0]["hops"]
