"""ReasonRAG on the embedded model: 2 shared HotpotQA questions, a tiny tree, via the CLI; the DPO
export trains one step with `agentrag train dpo`; a rerun pays no LLM call.

The 135M model ignores the <query>/<answer> tags, so the run uses max_iter=2 with
``accept_untagged_answer`` (the forced round's text is its answer) and pairs untagged outputs
too; the two questions are comparisons whose answer names an entity of the question, so some
samples score F1 > 0 and siblings differ.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.ingest import pooled_passages
from rerun_check import rerun_pays_nothing

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SETTINGS = ["mcts.iterations=6", "mcts.max_iter=2", "mcts.max_tokens=64", "mcts.accept_untagged_answer=true",
            "pairs.include_untagged=true", "concurrency=1"]


@pytest.fixture(scope="module")
def questions(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = (data_dir / "hotpotqa" / "dev_distractor_200.jsonl").read_text(encoding="utf-8").splitlines()
    out = tmp_path_factory.mktemp("rr_q") / "hotpot_2.jsonl"
    out.write_text(lines[11] + "\n" + lines[13] + "\n", encoding="utf-8")  # two comparison questions
    return out


@pytest.fixture(scope="module")
def small_kb(questions: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rr_kb") / "kb"
    KnowledgeBase.build(pooled_passages([questions]), out, KBConfig(), progress=False)
    return out


def _synth(questions: Path, kb: Path, out: Path) -> dict[str, object]:
    args = ["synth", "reasonrag", "--dataset", str(questions), "--kb", str(kb), "--llm", "embedded",
            "--value", "spre", "--out", str(out)]
    for s in SETTINGS:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads((out / "metrics.json").read_text())


def test_embedded_reasonrag_end_to_end_resume_and_dpo(questions: Path, small_kb: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    m = _synth(questions, small_kb, out)
    assert m["questions"] == 2 and m["unfinished"] == 0
    trees = [json.loads(line) for line in (out / "trees.jsonl").read_text().splitlines()]
    for t in trees:
        assert t["iterations"] == 6
        for n in t["nodes"][1:]:
            assert n["provenance"]["raw_output"] == n["response"] and n["usage"]["calls"] == 1
            if n["depth"] == 2:  # the forced round: a real leaf with its F1 as value
                assert n["forced"] and n["action"] == "answer" and n["estimates"][0]["v"] == n["score"]
    assert m["pairs"] >= 1, m  # type: ignore[operator]
    for line in (out / "pairs.jsonl").read_text().splitlines():
        p = json.loads(line)["metadata"]
        assert p["gap"] >= 0.01 and p["chosen_value"] > p["rejected_value"]
    assert (out / "dpo" / "dataset_info.json").exists() and (out / "dpo" / "dpo_alpaca.jsonl").exists()
    calls = m["llm_calls"]["total"]  # type: ignore[index]
    assert calls >= 12  # 2 questions x 6 expansions, plus rollouts

    again = rerun_pays_nothing(out, lambda: _synth(questions, small_kb, out))  # nothing left, nothing paid
    assert again["pairs"] == m["pairs"]

    res = CliRunner().invoke(app, ["train", "dpo", "--data", str(out / "dpo" / "trl_dpo.jsonl"), "--out",
                                   str(tmp_path / "train"), "--max-steps", "1", "--set", "max_length=512",
                                   "--set", "save_model=false"])
    assert res.exit_code == 0, res.output
    tm = json.loads((tmp_path / "train" / "metrics.json").read_text())
    assert tm["global_step"] == 1 and tm["finite"]
    assert math.isclose(tm["losses"][0], math.log(2), rel_tol=1e-3)
