"""Training entry points without a model: resume of finished runs, model references, CLI errors."""

from __future__ import annotations

import json

import pytest

from agentrag.config import dump_config
from agentrag.errors import UserError
from agentrag.train.config import SFTTrainConfig
from agentrag.train.sft import finished_run, train_sft


def _data(tmp_path):
    p = tmp_path / "sft.jsonl"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "q"},
                                          {"role": "assistant", "content": "a"}]}) + "\n")
    return p


def _finished(run, cfg, data, **over):
    run.mkdir()
    (run / "config.yaml").write_text(dump_config(cfg))
    metrics = {"global_step": 2, "losses": [1.0, 0.5], "final_loss": 0.5, "finite": True, "data": str(data)}
    metrics.update(over)
    (run / "metrics.json").write_text(json.dumps(metrics))
    (run / "checkpoint").mkdir()
    (run / "checkpoint" / "config.json").write_text("{}")
    return metrics


def test_rerun_of_a_finished_run_resumes_without_training(tmp_path):
    data = _data(tmp_path)
    cfg = SFTTrainConfig(max_steps=2)
    metrics = _finished(tmp_path / "run", cfg, data)
    assert train_sft(data, tmp_path / "run", cfg) == metrics  # returns at once: no model is loaded


def test_changed_config_or_bad_loss_is_not_a_finished_run(tmp_path):
    data = _data(tmp_path)
    cfg = SFTTrainConfig(max_steps=2)
    _finished(tmp_path / "run", cfg, data)
    assert finished_run(tmp_path / "run", cfg, data) is not None
    assert finished_run(tmp_path / "run", cfg.model_copy(update={"max_steps": 3}), data) is None
    assert finished_run(tmp_path / "run", cfg, tmp_path / "other.jsonl") is None
    _finished(tmp_path / "run2", cfg, data, finite=False)
    assert finished_run(tmp_path / "run2", cfg, data) is None
    assert finished_run(tmp_path / "missing", cfg, data) is None


def test_bad_model_reference_is_a_user_error(tmp_path):
    from agentrag.train.model import load_tokenizer

    with pytest.raises(UserError, match="--model 'nope'"):
        load_tokenizer("nope")


def test_cli_train_reports_bad_data_with_file_and_line(tmp_path):
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "assistant", "content": "a"}]}) + "\n{not json\n")
    res = CliRunner().invoke(app, ["train", "sft", "--data", str(bad), "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "bad.jsonl:2" in res.output
    res = CliRunner().invoke(app, ["train", "dpo", "--data", str(bad), "--out", str(tmp_path / "r"),
                                   "--set", "bta=0.2"])
    assert res.exit_code == 2 and "beta" in res.output


def test_adding_gguf_export_to_a_finished_run_does_not_retrain(tmp_path):
    from pydantic import ValidationError

    data = _data(tmp_path)
    cfg = SFTTrainConfig(max_steps=2)
    metrics = _finished(tmp_path / "run", cfg, data)
    with_gguf = cfg.model_copy(update={"export_gguf": "q8_0"})
    assert finished_run(tmp_path / "run", with_gguf, data) == metrics  # the export is no training setting
    (tmp_path / "run" / "checkpoint.q8_0.gguf").write_bytes(b"GGUF")  # already written: kept as it is
    out = train_sft(data, tmp_path / "run", with_gguf)
    assert out["gguf"] == str(tmp_path / "run" / "checkpoint.q8_0.gguf") and out["gguf_quant"] == "q8_0"
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["gguf"] == out["gguf"]
    assert (tmp_path / "run" / "checkpoint.q8_0.gguf").read_bytes() == b"GGUF"
    with pytest.raises(ValidationError):
        SFTTrainConfig(export_gguf="q4_k")
