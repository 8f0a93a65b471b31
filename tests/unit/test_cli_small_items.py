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


def test_a_csv_input_gets_a_conversion_hint(tmp_path):
    data = tmp_path / "qa.csv"
    data.write_text("id,question,answer\nq1,who?,me\n")
    r = runner.invoke(app, ["eval", "--dataset", str(data), "--kb", str(tmp_path), "--out", str(tmp_path / "o")])
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "looks like CSV" in out and "csv.DictReader" in out and "qa.jsonl" in out
    (tmp_path / "kbin.jsonl").write_text("title,text\nA,b\n")  # a CSV under a .jsonl name
    r = runner.invoke(app, ["kb", "build", str(tmp_path / "kbin.jsonl"), "--out", str(tmp_path / "kb")])
    assert r.exit_code == 2 and "looks like CSV" in " ".join(r.output.split())


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
