"""CLI error paths: user text printed verbatim, bad paths end as exit code 2 naming the path."""

from __future__ import annotations

from typer.testing import CliRunner

from agentrag.cli.main import app

runner = CliRunner()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_error_path_with_brackets_is_printed_verbatim(tmp_path):
    kb = tmp_path / "[run]" / "kb"
    res = runner.invoke(app, ["kb", "stats", str(kb)])
    assert res.exit_code == 2, res.output
    assert f"error: {kb} is not a knowledge base" in res.output


def test_error_path_that_looks_like_a_closing_tag_does_not_crash(tmp_path):
    bad = tmp_path / "a[/b]" / "x.jsonl"
    res = runner.invoke(app, ["kb", "build", str(bad), "--out", str(tmp_path / "kb")])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert f"error: {bad}: file not found" in res.output
