"""The endpoint faults against eval and every synthesizer, through the CLI: a 429 with Retry-After,
a 503 with an HTTP-date Retry-After, a truncated 200, a wrong-shaped 200 and a stall past the
client's timeout on the first request. Each run ends finished (exit 0) or with the item unfinished
(exit 3, the backend's retries spent), a rerun finishes it, and no request is paid twice (the one
that failed is the only extra). A 401 or 404 on the first request stops the run at once: exit 2,
one line naming the endpoint, nothing finished; a healthy rerun pays nothing twice."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_eval_failures import dataset, eval_args, llm_yaml
from test_eval_outages import PASSAGES, stub_reply
from test_fault_disk_synth import LLM_WORLDS, WORLDS
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.testing import FakeRetriever, StubOpenAIServer

pytestmark = pytest.mark.timeout(240)


def patch_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentrag.kb

    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(PASSAGES), raising=False)


@contextmanager
def eval_world(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StubOpenAIServer, Any]]:
    patch_eval(monkeypatch)
    data = dataset(tmp, 2)
    with StubOpenAIServer(reply=stub_reply) as srv:
        llm = llm_yaml(tmp, "agent", srv.base_url, max_retries=0)
        yield srv, lambda out: CliRunner().invoke(app, eval_args(data, out, llm))


ALL = {"eval": eval_world, **{w: WORLDS[w] for w in LLM_WORLDS}}
FAULTS = ["429@0.3", "503@date+1", "truncated", "tool_args_list", "stall"]
#: longer than every world's client timeout (3 or 5 s): the stalled request times out
STALL_S = 6.0


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("world", list(ALL))
def test_a_fault_on_the_first_request_then_a_rerun_pays_nothing_twice(world, fault, tmp_path, monkeypatch):
    with ALL[world](tmp_path, monkeypatch) as (srv, run):
        res = run(tmp_path / "baseline")
        assert res.exit_code == 0, res.output
        baseline = srv.requests
        srv.requests = 0
        srv.faults = [fault]
        srv.stall_s = STALL_S
        out = tmp_path / "run"
        res = run(out)
        assert srv.injected == [fault]
        assert res.exit_code in (0, 3), res.output
        assert "Traceback" not in res.output
        if res.exit_code == 3:
            res = run(out)
            assert res.exit_code == 0, res.output
        assert srv.requests <= baseline + 1  # the faulted request is the only one asked again


@pytest.mark.parametrize("status", ["401", "404"])
@pytest.mark.parametrize("world", list(ALL))
def test_an_endpoint_error_stops_the_run_with_one_line_exit_2_and_nothing_finished(world, status, tmp_path,
                                                                                  monkeypatch):
    from test_eval_failures import one_error_line

    with ALL[world](tmp_path, monkeypatch) as (srv, run):
        res = run(tmp_path / "baseline")
        assert res.exit_code == 0, res.output
        baseline, srv.requests = srv.requests, 0
        srv.faults = [status]
        out = tmp_path / "run"
        res = run(out)
        assert res.exit_code == 2, res.output
        assert srv.requests == 1  # stopped at the first one
        line = one_error_line(res.output)
        assert status in line and "127.0.0.1" in line, line
        assert not (out / "metrics.json").exists()
        res = run(out)
        assert res.exit_code == 0, res.output
        assert srv.requests <= baseline + 1  # the refused request is the only one asked again
