"""Dataset cards (issue 25, item 4): a config name bound to the content, license (user-set,
default unknown), task categories, language, and a load_dataset("json", ...) example."""

from __future__ import annotations

import yaml
from test_export_sft import TOOLS, make_traj

from agentrag.export.hf import DEFAULT_LICENSE
from agentrag.export.sft import write_sft_export


def _header(path) -> dict:
    return yaml.safe_load((path / "README.md").read_text().split("---")[1])


def test_card_fields_and_default_license(tmp_path):
    write_sft_export(tmp_path / "a", [make_traj(0)], "SYS", TOOLS)
    h = _header(tmp_path / "a")
    assert h["license"] == DEFAULT_LICENSE == "unknown"
    assert h["task_categories"] == ["text-generation"] and h["language"] == ["en"]
    assert h["configs"][0]["config_name"].startswith("sft-") and h["configs"][0]["config_name"] != "default"
    card = (tmp_path / "a" / "README.md").read_text()
    assert 'load_dataset("json", data_files="trl_sft.jsonl", split="train")' in card


def test_config_name_follows_the_content_and_license_is_user_set(tmp_path):
    write_sft_export(tmp_path / "a", [make_traj(0)], "SYS", TOOLS)
    write_sft_export(tmp_path / "b", [make_traj(1)], "SYS", TOOLS, license="cc-by-sa-4.0")
    write_sft_export(tmp_path / "c", [make_traj(0)], "SYS", TOOLS)
    a, b, c = (_header(tmp_path / d) for d in "abc")
    assert a["configs"][0]["config_name"] != b["configs"][0]["config_name"]  # different rows, different cache key
    assert a["configs"][0]["config_name"] == c["configs"][0]["config_name"]  # same rows, same name
    assert b["license"] == "cc-by-sa-4.0"


def test_cli_license_option(tmp_path):
    from typer.testing import CliRunner

    from agentrag.cli.main import app
    from agentrag.records import write_jsonl

    p = tmp_path / "trajs.jsonl"
    write_jsonl(p, [make_traj(0)])
    res = CliRunner().invoke(app, ["export", "sft", "-t", str(p), "-o", str(tmp_path / "o"), "--license", "mit"])
    assert res.exit_code == 0, res.output
    assert _header(tmp_path / "o")["license"] == "mit"
