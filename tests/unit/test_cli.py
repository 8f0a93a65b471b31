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
