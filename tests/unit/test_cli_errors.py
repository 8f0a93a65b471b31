"""CLI error paths: user text printed verbatim, bad paths end as exit code 2 naming the path."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _embedded_model_file(tmp_path_factory, monkeypatch):
    """A stand-in GGUF file where the embedded model is looked up (unit tests see no installed model)."""
    gguf = tmp_path_factory.mktemp("model") / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr("agentrag.paths.embedded_gguf", lambda: gguf)


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


def _files(tmp_path):
    d = tmp_path / "adir"
    d.mkdir()
    f = tmp_path / "afile.txt"
    f.write_text("x\n")
    good = tmp_path / "qa.jsonl"
    good.write_text('{"id": "1", "question": "q", "golden_answers": ["a"]}\n')
    sft = tmp_path / "sft.jsonl"
    sft.write_text('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}\n')
    return d, f, good, sft


# (arguments, the path the message must name); {d}: a directory, {f}: a plain file
DIR_AS_FILE = [
    ["kb", "build", "{d}", "--out", "{t}/kb"],
    ["kb", "eval-recall", "{t}/nokb", "{f}", "--out", "{d}"],
    ["eval", "--dataset", "{d}", "--kb", "x", "--out", "{t}/run"],
    ["synth", "ragshaper", "--kb", "x", "--seeds", "{d}", "--out", "{t}/run"],
    ["export", "sft", "-t", "{d}", "--out", "{t}/exp"],
    ["export", "dpo", "-p", "{d}", "--out", "{t}/exp"],
    ["train", "sft", "--data", "{d}", "--out", "{t}/run"],
    ["train", "dpo", "--data", "{d}", "--out", "{t}/run"],
    ["kb", "build", "{good}", "--config", "{d}", "--out", "{t}/kb"],
]
OUT_IS_FILE = [
    ["kb", "build", "{good}", "--out", "{f}"],
    ["eval", "--dataset", "{good}", "--kb", "x", "--out", "{f}"],
    ["synth", "ragshaper", "--kb", "x", "--seeds", "2", "--out", "{f}"],
    ["export", "sft", "-t", "{empty}", "--out", "{f}"],
    ["train", "sft", "--data", "{sft}", "--out", "{f}/sub"],
]


def _fill(args, tmp_path):
    d, f, good, sft = _files(tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    return [a.format(d=d, f=f, t=tmp_path, good=good, sft=sft, empty=empty) for a in args]


@pytest.mark.parametrize("args", DIR_AS_FILE, ids=[" ".join(a[:2]) + f" {i}" for i, a in enumerate(DIR_AS_FILE)])
def test_a_directory_where_a_file_is_expected_is_a_user_error(args, tmp_path, monkeypatch):
    import agentrag.kb

    monkeypatch.setattr(agentrag.kb.KnowledgeBase, "load", classmethod(lambda cls, d, **kw: _FakeKB()))
    res = runner.invoke(app, _fill(args, tmp_path))
    assert res.exit_code == 2, (args, res.output, res.exception)
    assert f"{tmp_path / 'adir'}: is a directory; expected a file" in _flat(res.output), res.output
    assert not (tmp_path / "run").exists() and not (tmp_path / "kb").exists()


@pytest.mark.parametrize("args", OUT_IS_FILE, ids=[" ".join(a[:2]) for a in OUT_IS_FILE])
def test_out_pointing_at_a_file_is_a_user_error(args, tmp_path):
    res = runner.invoke(app, _fill(args, tmp_path))
    assert res.exit_code == 2, (args, res.output, res.exception)
    flat = _flat(res.output)
    assert str(tmp_path / "afile.txt") in flat, flat
    assert "is an existing file" in flat or "which is a file" in flat, flat
    assert (tmp_path / "afile.txt").read_text() == "x\n"


def test_rundir_on_an_existing_file(tmp_path):
    from agentrag.errors import UserError
    from agentrag.runs import RunDir

    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(UserError, match="is an existing file"):
        RunDir(f)
    with pytest.raises(UserError, match="which is a file"):
        RunDir(f / "run")


def test_kb_build_ingest_error_leaves_no_partial_dir(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "a", "text": "fine"}\n{"title": "b"}\n')
    res = runner.invoke(app, ["kb", "build", str(bad), "--out", str(tmp_path / "kb")])
    assert res.exit_code == 2 and "bad.jsonl:2" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


@pytest.mark.parametrize("case", ["eval-llm", "eval-agent", "synth-llm", "synth-seeds", "train-model"])
def test_inputs_are_checked_before_the_run_directory_is_written(case, tmp_path, monkeypatch):
    import agentrag.kb

    monkeypatch.setattr(agentrag.kb.KnowledgeBase, "load", classmethod(lambda cls, d, **kw: _FakeKB()))
    _, _, good, sft = _files(tmp_path)
    run = tmp_path / "run"
    args, expect = {
        "eval-llm": (["eval", "--dataset", str(good), "--kb", "x", "--llm", "nope"], "--llm 'nope'"),
        "eval-agent": (["eval", "--dataset", str(good), "--kb", "x", "--agent", "nope"], "unknown agent 'nope'"),
        "synth-llm": (["synth", "ragshaper", "--kb", "x", "--seeds", "2", "--teacher", "nope"], "--llm 'nope'"),
        "synth-seeds": (["synth", "ragshaper", "--kb", "x", "--seeds", str(tmp_path / "none.txt")], "none.txt"),
        "train-model": (["train", "sft", "--data", str(sft), "--set", f"model={tmp_path / 'nomodel'}"],
                        "nomodel"),
    }[case]
    res = runner.invoke(app, [*args, "--out", str(run)])
    assert res.exit_code == 2, (res.output, res.exception)
    assert expect in _flat(res.output), res.output
    assert not run.exists()


class _FakeKB:
    """Stands in for a loaded KB where a test only needs the command to get past loading it."""

    def sample_titles(self, n: int, seed: int = 0) -> list[str]:
        return ["Ada Varn"][:n]
