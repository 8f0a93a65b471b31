"""`agentrag synth reasonrag` input checks: every bad input is a one-line error naming the file,
and nothing is written."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from agentrag.cli.main import app


def _flashrag(path, ids, answers=("x",)):
    path.write_text("".join(json.dumps({"id": i, "question": f"q {i}?", "golden_answers": list(answers)}) + "\n"
                            for i in ids))
    return path


def _invoke(*args):
    return CliRunner().invoke(app, ["synth", "reasonrag", *args])


def test_missing_dataset_and_kb(tmp_path):
    res = _invoke("--out", str(tmp_path / "run"), "--kb", str(tmp_path))
    assert res.exit_code == 2 and "--dataset" in res.output
    data = _flashrag(tmp_path / "a.jsonl", ["1"])
    res = _invoke("--out", str(tmp_path / "run"), "--dataset", str(data))
    assert res.exit_code == 2 and "--kb" in res.output
    assert not (tmp_path / "run").exists()


def test_duplicate_ids_across_files_and_missing_gold(tmp_path):
    a = _flashrag(tmp_path / "a.jsonl", ["1", "2"])
    b = _flashrag(tmp_path / "b.jsonl", ["2"])
    res = _invoke("--out", str(tmp_path / "run"), "--dataset", str(a), "--dataset", str(b), "--kb", str(tmp_path))
    assert res.exit_code == 2 and "b.jsonl" in res.output and "'2'" in res.output
    c = _flashrag(tmp_path / "c.jsonl", ["3"], answers=())
    res = _invoke("--out", str(tmp_path / "run"), "--dataset", str(c), "--kb", str(tmp_path))
    assert res.exit_code == 2 and "c.jsonl" in res.output and "gold" in res.output
    assert not (tmp_path / "run").exists()


def test_bad_value_kind_and_typo_key(tmp_path):
    a = _flashrag(tmp_path / "a.jsonl", ["1"])
    res = _invoke("--out", str(tmp_path / "run"), "--dataset", str(a), "--kb", str(tmp_path), "--value", "mc")
    assert res.exit_code == 2 and "spre" in res.output
    res = _invoke("--out", str(tmp_path / "run"), "--dataset", str(a), "--kb", str(tmp_path),
                  "--set", "mcts.max_child=3")
    assert res.exit_code == 2 and "max_children" in res.output
