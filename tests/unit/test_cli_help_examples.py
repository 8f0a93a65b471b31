"""Every command's ``--help`` example works (issue 28): each "Example:" line parses with its
command's options, and every ``--set KEY=VALUE`` in a help text (the example and the --set
option's own help) is a valid key of that command's config."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import typer

from agentrag.cli.main import app
from agentrag.config import load_config

CONFIGS = {
    "eval": "agentrag.eval.runner:EvalConfig",
    "synth ragshaper": "agentrag.synth.ragshaper.config:RagShaperRunConfig",
    "synth evipath": "agentrag.synth.evipath:EviPathRunConfig",
    "synth reasonrag": "agentrag.synth.reasonrag.config:ReasonRagRunConfig",
    "synth tracer": "agentrag.synth.tracer.config:TracerRunConfig",
}


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    out = [(" ".join(path), group)] if path else []
    if hasattr(group, "commands"):
        for name, cmd in group.commands.items():
            out += _commands(cmd, (*path, name))
    return out


ROOT = typer.main.get_command(app)
COMMANDS = _commands(ROOT)


def _help_text(cmd: Any) -> str:
    parts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    return " ".join(" ".join(parts).split())


def _example(cmd: Any) -> list[str] | None:
    m = re.search(r"Example: agentrag (.+?)(?:\s+\(|$)", " ".join((cmd.help or "").split()))
    return shlex.split(m.group(1)) if m else None


def _model(path: str) -> Any:
    mod, name = CONFIGS[path].split(":")
    return getattr(__import__(mod, fromlist=[name]), name)


def test_commands_are_found():
    names = {p for p, _ in COMMANDS}
    assert {"eval", "synth ragshaper", "synth reasonrag", "kb build", "view"} <= names


@pytest.mark.parametrize("path,cmd", [(p, c) for p, c in COMMANDS if _example(c)], ids=lambda x: str(x))
def test_each_help_example_parses_with_its_command(path, cmd):
    args = _example(cmd)
    words = path.split()
    assert args[:len(words)] == words, f"{path}: the example runs another command: {args}"
    ctx = cmd.make_context(f"agentrag {path}", args[len(words):], resilient_parsing=False)
    assert ctx.params is not None


@pytest.mark.parametrize("path,cmd", [(p, c) for p, c in COMMANDS if re.search(r"--set [\w.]+=", _help_text(c))], ids=lambda x: str(x))
def test_every_set_key_in_a_help_text_is_a_valid_config_key(path, cmd):
    sets = re.findall(r"--set ([\w.]+=[^\s)]+)", _help_text(cmd))
    if path not in CONFIGS:
        pytest.fail(f"{path} takes --set but this test does not know its config model; add it to CONFIGS")
    for item in sets:
        key = item.split("=")[0]
        cfg = load_config(_model(path), None, [item])  # an unknown key raises a UserError
        assert cfg is not None, key


def test_the_eval_help_shows_a_valid_set_example():
    cmd = dict(COMMANDS)["eval"]
    assert re.search(r"--set [\w.]+=", _help_text(cmd)), _help_text(cmd)


def test_the_old_invalid_example_is_refused_so_the_test_can_fail():
    from agentrag.errors import UserError

    with pytest.raises(UserError):
        load_config(_model("eval"), None, ["retrieval.top_k=5"])
