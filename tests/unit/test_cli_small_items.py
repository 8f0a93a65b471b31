"""The smaller items of issue 28, each through the command: a busy port fails before "serving on",
`view --out` keeps a file that is not a viewer page, a CSV input gets a conversion hint, eval's
format error names an option eval has, no DEBUG lines or "Loading weights" bars in normal output."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner
from viewer_support import eval_run

from agentrag.cli.common import setup_logging
from agentrag.cli.main import app

runner = CliRunner()


@pytest.fixture()
def busy_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("cmd", [["kb", "serve", "--kb", "KB"], ["llm", "serve"]])
def test_a_busy_port_fails_before_serving_on(cmd, busy_port, tmp_path):
    args = [tmp_path.as_posix() if a == "KB" else a for a in cmd]
    r = runner.invoke(app, [*args, "--port", str(busy_port)])
    assert r.exit_code == 2, r.output
    assert "serving" not in r.output and f"cannot serve on 127.0.0.1:{busy_port}" in r.output


def test_view_out_does_not_overwrite_a_file_that_is_not_a_viewer_page(tmp_path):
    run = eval_run(tmp_path / "run", n=2)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    r = runner.invoke(app, ["view", str(run), "--out", str(notes)])
    assert r.exit_code == 2 and "not a viewer page" in r.output and "--force" in r.output
    assert notes.read_text() == "my notes"
    page = tmp_path / "v.html"
    assert runner.invoke(app, ["view", str(run), "--out", str(page)]).exit_code == 0
    assert runner.invoke(app, ["view", str(run), "--out", str(page)]).exit_code == 0  # a viewer page: replaced
    assert runner.invoke(app, ["view", str(run), "--out", str(notes), "--force"]).exit_code == 0
    assert "viewer-data" in notes.read_text()


def _hint_command(output: str) -> list[str]:
    """The conversion command the hint prints (its last line), as argv."""
    import shlex

    line = [ln for ln in output.splitlines() if "-m agentrag.convert" in ln][-1]
    return shlex.split(line.strip())


def test_a_csv_input_gets_a_conversion_hint_that_writes_a_new_loadable_file(tmp_path):
    data = tmp_path / "qa.csv"
    data.write_text("id,question,answer\nq1,who?,me\nq2,when?,1990\n")
    (tmp_path / "qa.jsonl").write_text("precious\n")  # the obvious target exists: it must survive
    r = runner.invoke(app, ["eval", "--dataset", str(data), "--kb", str(tmp_path), "--out", str(tmp_path / "o")])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "looks like CSV" in out and "agentrag.convert" in out and " > " not in out
    cmd = _hint_command(r.output)
    assert Path(cmd[-1]) not in (data, tmp_path / "qa.jsonl")
    subprocess.run(cmd, check=True, capture_output=True)
    assert (tmp_path / "qa.jsonl").read_text() == "precious\n" and data.read_text().startswith("id,")
    from agentrag.eval.datasets import load_dataset

    items = load_dataset(cmd[-1])
    assert [(i.id, i.golden_answers) for i in items] == [("q1", ["me"]), ("q2", ["1990"])]
    again = subprocess.run(cmd, capture_output=True, text=True)  # a second run refuses, keeps the file
    assert again.returncode == 2 and "exists" in again.stderr
    assert len(load_dataset(cmd[-1])) == 2


def test_a_csv_named_jsonl_is_never_converted_onto_itself(tmp_path):
    src = tmp_path / "kbin.jsonl"  # a CSV under a .jsonl name
    src.write_text("title,text\nA,b\n")
    before = src.read_bytes()
    r = runner.invoke(app, ["kb", "build", str(src), "--out", str(tmp_path / "kb")])
    assert r.exit_code == 2 and "looks like CSV" in " ".join(r.output.split())
    cmd = _hint_command(r.output)
    assert Path(cmd[-1]) != src and not Path(cmd[-1]).exists()
    subprocess.run(cmd, check=True, capture_output=True)
    assert src.read_bytes() == before
    assert [json.loads(x) for x in Path(cmd[-1]).read_text().splitlines()] == [{"title": "A", "text": "b"}]
    from agentrag.convert import csv_to_jsonl

    with pytest.raises(Exception, match="exists"):
        csv_to_jsonl(src, src)
    assert src.read_bytes() == before


def test_csv_answers_cells_become_lists():
    from agentrag.convert import convert_row

    assert convert_row({"question": "q", "golden_answers": '["a", "b"]'}, 3) == \
        {"id": "row3", "question": "q", "golden_answers": ["a", "b"]}
    assert convert_row({"id": "x", "question": "q", "answers": "[not json"}, 1)["golden_answers"] == ["[not json"]
    assert convert_row({"title": "T", "text": "t"}, 1) == {"title": "T", "text": "t"}


def test_a_json_error_on_a_json_file_gets_no_csv_hint(tmp_path):
    data = tmp_path / "qa.jsonl"
    data.write_text('{"id": "q1", "question": \n')
    r = runner.invoke(app, ["eval", "--dataset", str(data), "--kb", str(tmp_path), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "invalid JSON" in r.output and "CSV" not in r.output


def test_eval_format_error_names_an_option_eval_has(tmp_path):
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"q": "who?", "a": "me"}) + "\n")
    r = runner.invoke(app, ["eval", "--dataset", str(data), "--kb", str(tmp_path), "--out", str(tmp_path / "o")])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "cannot tell the dataset format" in out
    assert "pass fmt=" not in out and "--set fmt=NAME" in out
    # and the named option works
    r = runner.invoke(app, ["eval", "--dataset", str(data), "--kb", str(tmp_path), "--out", str(tmp_path / "o"),
                            "--set", "fmt=flashrag", "--print-config"])
    assert r.exit_code == 0 and "fmt: flashrag" in r.output


def test_no_debug_lines_in_normal_output(capsys):
    noisy = logging.getLogger("some.library")
    noisy.setLevel(logging.DEBUG)  # a library that sets its own level
    try:
        setup_logging(verbose=False)
        noisy.debug("DEBUG detail nobody asked for")
        noisy.info("an info line")
        err = capsys.readouterr().err
        assert "an info line" in err and "DEBUG detail" not in err
        setup_logging(verbose=True)
        noisy.debug("DEBUG detail asked for")
        assert "DEBUG detail asked for" in capsys.readouterr().err
    finally:
        noisy.setLevel(logging.NOTSET)
        setup_logging(verbose=False)


def test_the_program_turns_off_loading_weights_bars():
    code = ("import sys, os; os.environ.pop('HF_HUB_DISABLE_PROGRESS_BARS', None); sys.argv = ['agentrag', 'version']\n"
            "from agentrag.cli.main import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "from transformers.utils import logging as tl\n"
            "print('BARS', tl.is_progress_bar_enabled())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).parent)
    assert "BARS False" in out.stdout, out.stdout + out.stderr
