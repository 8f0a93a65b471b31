"""Docs match behaviour: every `agentrag` command line in README.md and docs/*.md parses with its
command's options (as the `--help` examples do), every `--set KEY=VALUE` in them is a key of that
command's config, and the server's curl examples (`/retrieve` in both shapes, `/health`) run
against a live server and get the answers the docs describe."""

from __future__ import annotations

import json
import re
import shlex
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import typer

from agentrag.cli.main import app
from agentrag.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CLI = typer.main.get_command(app)
#: how the docs spell the agentrag executable in shell lines
EXECUTABLES = {"agentrag", "$A", "$AG", "\"$A\"", ".venv/bin/agentrag", "$AGENTRAG"}
CONFIGS = {
    "eval": "agentrag.eval.runner:EvalConfig",
    "synth ragshaper": "agentrag.synth.ragshaper.config:RagShaperRunConfig",
    "synth evipath": "agentrag.synth.evipath:EviPathRunConfig",
    "synth reasonrag": "agentrag.synth.reasonrag.config:ReasonRagRunConfig",
    "synth tracer": "agentrag.synth.tracer.config:TracerRunConfig",
}


def _shell_blocks(text: str) -> list[str]:
    """The lines of fenced shell code blocks (bash/sh/console or unlabeled), continuations joined."""
    lines: list[str] = []
    block: list[str] | None = None
    shell = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if block is None:
                block, shell = [], line.strip()[3:].strip() in ("", "bash", "sh", "shell", "console")
            else:
                if shell:
                    joined = re.sub(r"\\\n\s*", " ", "\n".join(block))
                    lines += [ln.strip() for ln in joined.splitlines()]
                block = None
        elif block is not None:
            block.append(line)
    return lines


def _synopsis(words: list[str]) -> list[str]:
    """A usage synopsis as a command line: ``[--opt V]`` -> ``--opt V``, ``a|b`` -> ``a``."""
    text = " ".join(words)
    text = re.sub(r"\[([^\[\]]*?)\s\|\s[^\[\]]*\]", r"[\1]", text)  # [a | b]: the first alternative
    text = text.replace("[", "").replace("]", "")
    out: list[str] = []
    for w in shlex.split(text):
        if w == "...":  # a value left out ("--dataset ..."), or "the options shown before"
            if out and out[-1].startswith("--"):
                out.append("X")
            continue
        out.append(w.split("|")[0])
    return out


def _command_lines() -> list[tuple[str, list[str]]]:
    out = []
    for path in DOC_FILES:
        for line in _shell_blocks(path.read_text(encoding="utf-8")):
            line = line.split(" #")[0].strip().rstrip(";")
            for part in re.split(r"\s(?:&&|\|\||;|\|)\s", line):
                try:
                    words = shlex.split(part, posix=False)
                except ValueError:
                    continue
                while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value prefixes
                    words = words[1:]
                if words and words[0] in EXECUTABLES and len(words) > 1:
                    out.append((f"{path.relative_to(ROOT)}", _synopsis(words[1:])))
    return out


LINES = _command_lines()
#: placeholders the docs use for values; parsed as these
PLACEHOLDERS = {"N": "2", "K": "3", "R": "2", "S": "2", "PORT": "8000", "SECRET": "s3cret"}


def _resolve(args: list[str]) -> tuple[str, Any, list[str]]:
    cmd: Any = CLI
    path: list[str] = []
    rest = list(args)
    while hasattr(cmd, "commands") and rest and rest[0] in cmd.commands:
        path.append(rest[0])
        cmd = cmd.commands[rest.pop(0)]
    return " ".join(path), cmd, rest


def test_the_docs_have_command_lines_to_check():
    files = {f for f, _ in LINES}
    assert len(LINES) >= 40 and {"docs/kb.md", "docs/eval.md", "docs/quickstart.md"} <= files, files


def test_the_readme_python_example_compiles_and_names_the_public_api():
    import ast

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        tree = ast.parse(block)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agentrag"):
                mod = __import__(node.module, fromlist=[a.name for a in node.names])
                for a in node.names:
                    assert hasattr(mod, a.name), f"README imports {a.name} from {node.module}"


@pytest.mark.parametrize("where,args", LINES, ids=[f"{f}:{' '.join(a)[:60]}" for f, a in LINES])
def test_every_documented_command_line_parses(where, args):
    path, cmd, rest = _resolve([a.strip('"') for a in args])
    assert path, f"{where}: `agentrag {' '.join(args)}` names no command"
    if hasattr(cmd, "commands") and not cmd.params:  # a group alone (`agentrag synth --help`)
        assert not rest or rest[0] in ("--help", "-h"), f"{where}: unknown command {rest[0]!r} under {path!r}"
        return
    rest = [PLACEHOLDERS.get(a, a) for a in rest]
    if "--help" in rest:
        return
    ctx = cmd.make_context(f"agentrag {path}", rest, resilient_parsing=False)
    assert ctx.params is not None
    for item in ctx.params.get("set_") or ctx.params.get("sets") or []:
        if path in CONFIGS:
            mod, name = CONFIGS[path].split(":")
            load_config(getattr(__import__(mod, fromlist=[name]), name), None, [item])


def test_an_old_spelling_or_a_typo_would_fail_this_test():
    path, cmd, rest = _resolve(["kb", "search", "--kb", "runs/kb", "q", "--topkk", "3"])
    with pytest.raises(Exception, match="No such option: --topkk"):
        cmd.make_context(f"agentrag {path}", rest, resilient_parsing=False)


def _curl_examples() -> list[tuple[str, str, dict[str, Any] | None]]:
    """(method, path, body) of each curl line in docs/kb.md."""
    out = []
    for line in _shell_blocks((ROOT / "docs" / "kb.md").read_text(encoding="utf-8")):
        if not line.startswith("curl "):
            continue
        words = shlex.split(line)
        url = next(w for w in words if w.startswith("http"))
        body = json.loads(words[words.index("-d") + 1]) if "-d" in words else None
        out.append(("POST" if body is not None else "GET", "/" + url.split("/", 3)[3], body))
    return out


def test_the_curl_examples_run_against_a_live_server(tmp_path):
    from test_eval_outages import ServerThread

    from agentrag.records import Passage
    from agentrag.testing import FakeRetriever

    examples = _curl_examples()
    assert {(m, p) for m, p, _ in examples} == {("GET", "/health"), ("POST", "/retrieve")}
    shapes = {"batch" if "queries" in b else "single" for m, p, b in examples if b}
    assert shapes == {"batch", "single"}
    passages = [Passage(id=f"p{i}", title="Toto (band)", text=f"Toto was founded by Jeff Porcaro {i}.")
                for i in range(5)]
    server = ServerThread(FakeRetriever(passages)).start()
    try:
        for method, path, body in examples:
            data = None if body is None else json.dumps(body).encode()
            req = urllib.request.Request(server.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == 200
                answer = json.loads(resp.read())
            if body is None:
                assert answer["status"] == "ok"
            elif "queries" in body:
                assert len(answer["result"]) == len(body["queries"])
                assert all(len(r) == body["topk"] and "document" in r[0] and "score" in r[0] for r in answer["result"])
            else:
                assert len(answer["results"]) == body["topk"] and "contents" in answer["results"][0]
    finally:
        server.stop()
