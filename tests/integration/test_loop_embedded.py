"""The closed loop, tiny, on the shared data and the embedded model: the annotated teacher on real
MuSiQue / 2Wiki training records and a KB of their contexts, one SFT step, the trained checkpoint
evaluated through ``--llm hf:`` on one 2Wiki dev question, the before/after comparison."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SHARED = Path(os.environ.get("AGENTRAG_SHARED", Path(__file__).resolve().parents[2].parent / "shared")) / "data"


def _head(src: Path, dst: Path, n: int) -> Path:
    dst.write_text("".join(src.read_text(encoding="utf-8").splitlines(keepends=True)[:n]), encoding="utf-8")
    return dst


def test_loop_teacher_train_hf_eval(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentrag.cli.main import app
    from agentrag.eval.compare import compare

    run = CliRunner()
    mus = _head(SHARED / "musique" / "train_397.jsonl", tmp_path / "musique_train.jsonl", 3)
    wiki = _head(SHARED / "2wikimultihopqa" / "train_600.jsonl", tmp_path / "2wiki_train.jsonl", 3)
    dev = _head(SHARED / "2wikimultihopqa" / "dev_with_context_164.jsonl", tmp_path / "2wiki_dev.jsonl", 1)
    for args in (["kb", "build", str(mus), str(wiki), "--out", str(tmp_path / "kb_train")],
                 ["kb", "build", str(dev), "--out", str(tmp_path / "kb_dev")]):
        res = run.invoke(app, args)
        assert res.exit_code == 0, res.output

    # the compact protocol of scripts/loop.sh: short system prompt, 3 documents cut to 200 characters,
    # half of the paths in the forced-answer form
    prompt = "Search with the `{tool}` tool, one fact at a time; answer inside <answer></answer>."
    res = run.invoke(app, ["synth", "annotated", "--dataset", str(mus), "--dataset", str(wiki), "--kb",
                           str(tmp_path / "kb_train"), "--out", str(tmp_path / "synth"), "--set", "top_k=3",
                           "--set", "doc_chars=200", "--set", "forced_share=0.5", "--set", f"system_prompt={prompt}"])
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "synth" / "metrics.json").read_text())
    assert metrics["funnel"][0]["in"] == 6 and metrics["llm"] == {}
    kept = metrics["export"]["exported"]
    assert kept >= 3, metrics["funnel"]  # real KB searches find most supporting paragraphs
    recs = [json.loads(x) for x in (tmp_path / "synth" / "sft" / "trl_sft.jsonl").read_text().splitlines()]
    rec = recs[0]
    assert rec["messages"][3]["role"] == "tool" and rec["messages"][3]["content"].startswith("Doc 1 (Title: ")
    assert rec["messages"][0]["content"] == prompt.format(tool="dense_search")
    forced = [r for r in recs if not r["tools"]]
    assert len(forced) == metrics["export"]["forced_answer"]
    assert all(r["messages"][-2]["content"].startswith("You have no searches left") for r in forced)
    pe = metrics["export"]["planner_executor"]
    assert pe["planner_conversations"] == kept and pe["executor_conversations"] >= kept

    res = run.invoke(app, ["train", "sft", "--data", str(tmp_path / "synth" / "sft" / "trl_sft.jsonl"), "--out",
                           str(tmp_path / "train"), "--max-steps", "1", "--set", "batch_size=1",
                           "--set", "max_length=768"])
    assert res.exit_code == 0, res.output
    ckpt = tmp_path / "train" / "checkpoint"

    (tmp_path / "eval.yaml").write_text("agent: react\nagent_config: {max_steps: 2, max_tokens: 24, top_k: 3, "
                                        f"doc_chars: 200, system_prompt: {json.dumps(prompt)}}}\n")
    for name, llm in (("base", "embedded"), ("trained", f"hf:{ckpt}")):
        res = run.invoke(app, ["eval", "--config", str(tmp_path / "eval.yaml"), "--dataset", str(dev), "--kb",
                               str(tmp_path / "kb_dev"), "--llm", llm, "--out", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
    trained = json.loads((tmp_path / "trained" / "metrics.json").read_text())
    assert trained["n"] == 1
    row = json.loads((tmp_path / "trained" / "results.jsonl").read_text().splitlines()[0])
    assert row["trajectory"]["model"] == str(ckpt.resolve()) and row["trajectory"]["usage"]["completion_tokens"] > 0
    cmp = compare(tmp_path / "base", tmp_path / "trained", resamples=100)
    assert cmp["n_paired"] == 1 and set(cmp["base"]) == set(cmp["trained"])
