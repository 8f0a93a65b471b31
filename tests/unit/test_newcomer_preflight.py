"""Pre-flight (issue 28): before the first item, eval and every synth command check their LLM
endpoints; nothing listening is one error line naming the endpoint, exit 2, in seconds (not
~10 s of retries per item); a live endpoint (an OpenAI-compatible stub) passes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import UserError
from agentrag.llm.preflight import preflight_llm
from agentrag.testing import StubOpenAIServer

runner = CliRunner()
DEAD = "openai:foo@http://127.0.0.1:9/v1"


def _dataset(tmp_path: Path) -> Path:
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps({"id": "q0", "question": "Who?", "golden_answers": ["Rush"]}) + "\n")
    return path


def _error_line(output: str) -> str:
    assert "Traceback" not in output, output
    return " ".join(output[output.index("error:"):].split())


def test_eval_against_nothing_listening_fails_in_seconds_naming_the_endpoint(tmp_path, monkeypatch):
    import agentrag.kb
    from agentrag.testing import FakeRetriever

    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever([]), raising=False)
    start = time.monotonic()
    res = runner.invoke(app, ["eval", "--dataset", str(_dataset(tmp_path)), "--kb", "kbdir", "--agent", "react",
                              "--llm", DEAD, "--out", str(tmp_path / "run")])
    assert res.exit_code == 2, res.output
    assert time.monotonic() - start < 5
    line = _error_line(res.output)
    assert "http://127.0.0.1:9/v1" in line and "--llm" in line
    assert not (tmp_path / "run").exists()  # no half-made run directory


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    from agentrag.kb import build_kb

    root = tmp_path_factory.mktemp("preflight")
    with (data_dir / "hotpotqa" / "dev_distractor_200.jsonl").open(encoding="utf-8") as fh:
        (root / "h.jsonl").write_text("".join(next(fh) for _ in range(2)), encoding="utf-8")
    build_kb([root / "h.jsonl"], root / "kb", method="bm25", progress=False)
    return root / "kb"


@pytest.mark.parametrize("args", [
    # the KB is BM25-only: RAGShaper reads it with BM25 (its dense defaults are a local input error, reported first)
    ["synth", "ragshaper", "--seeds", "1", "--set", "curator.method=bm25", "--set", "elicit.method=bm25"],
    ["synth", "tracer", "--docs", "1"],
    ["synth", "reasonrag", "--limit", "1"],
    ["synth", "evipath", "--limit", "1"],
])
def test_every_synth_command_checks_its_llm_before_the_first_item(tmp_path, args, small_kb, data_dir):
    """Valid local inputs (they are checked first: a bad file is reported before any network
    check), a dead endpoint: one line naming it, exit 2, in seconds, nothing written."""
    start = time.monotonic()
    full = [*args, "--llm", DEAD, "--out", str(tmp_path / "run")]
    if args[1] != "evipath":
        full += ["--kb", str(small_kb)]
    if args[1] == "reasonrag":
        full += ["--dataset", str(_dataset(tmp_path))]
    if args[1] == "evipath":
        full += ["--dataset", str(data_dir / "musique" / "train_100.jsonl")]
    res = runner.invoke(app, full)
    assert res.exit_code == 2, res.output
    assert time.monotonic() - start < 6
    assert "127.0.0.1:9" in _error_line(res.output)
    assert not (tmp_path / "run").exists()


def test_a_live_endpoint_passes_and_consumes_no_scripted_fault():
    with StubOpenAIServer(["500"]) as srv:
        preflight_llm(f"openai:stub@{srv.base_url}")
        assert srv.requests == 0  # GET /models is not a completion: the scripted faults stay for the run


def test_a_refused_key_is_named(monkeypatch):
    import http.server
    import threading

    class Deny(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Deny)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(UserError, match="refused the API key"):
            preflight_llm(f"openai:m@http://127.0.0.1:{httpd.server_port}/v1")
    finally:
        httpd.shutdown()


def test_the_embedded_backend_needs_no_request():
    preflight_llm("embedded")  # no network, no error
