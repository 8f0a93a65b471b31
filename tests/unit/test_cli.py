from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from agentrag.cli.main import app

runner = CliRunner()


def test_version_lists_dependencies():
    res = runner.invoke(app, ["version"])
    assert res.exit_code == 0, res.output
    assert "agentrag 0.1.0" in res.output and "pydantic" in res.output


def test_every_command_has_help():
    import typer.main

    cmd = typer.main.get_command(app)

    def walk(c, path):
        res = runner.invoke(app, [*path, "--help"])
        assert res.exit_code == 0, (path, res.output)
        assert c.help or c.short_help, f"command {' '.join(path) or 'agentrag'} has no help text"
        for name, sub in getattr(c, "commands", {}).items():
            walk(sub, [*path, name])

    walk(cmd, [])


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "agentrag", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "knowledge bases" in out.stdout


def test_root_help_lists_only_groups_that_exist():
    import importlib.util

    import typer.main

    from agentrag.cli.main import GROUPS

    cmd = typer.main.get_command(app)
    assert set(cmd.commands) == {*GROUPS, "version", "doctor"}
    for name in GROUPS:
        assert importlib.util.find_spec(f"agentrag.cli.{name}") is not None
    res = runner.invoke(app, ["--help"])
    for absent in ("report", "bench"):
        assert absent not in cmd.commands and f"│ {absent} " not in res.output


def test_help_names_no_synthesizer_without_a_command():
    import typer.main

    synth = typer.main.get_command(app).commands["synth"]
    text = runner.invoke(app, ["--help"]).output + runner.invoke(app, ["synth", "--help"]).output
    for paper, command in (("RAGShaper", "ragshaper"), ("EviPath", "evipath"), ("ReasonRAG", "reasonrag"),
                           ("AgenticRAGTracer", "tracer")):
        if paper in text:
            assert command in synth.commands, f"help advertises {paper} but there is no `synth {command}`"
    assert "ragshaper" in synth.commands and "ragshaper" in text


def test_a_missing_group_module_is_an_import_error():
    import pytest
    import typer

    from agentrag.cli.main import register_groups

    with pytest.raises(ModuleNotFoundError, match="agentrag.cli.nope"):
        register_groups(typer.Typer(), ["kb", "nope"])
