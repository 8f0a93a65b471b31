"""Default output is quiet about libraries (no HTTP client line per request) and a config error
names where the value came from (the file or --set) and the full key, agent_config included."""

from __future__ import annotations

import logging

import pytest
from test_eval_failures import dataset, eval_args, fake_kb, llm_yaml  # noqa: F401
from test_eval_outages import stub_reply
from typer.testing import CliRunner

from agentrag.cli.common import setup_logging
from agentrag.cli.main import app
from agentrag.testing import StubOpenAIServer

runner = CliRunner()


@pytest.fixture()
def restore_logging():
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), logging.getLogger("agentrag").level)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    logging.getLogger("agentrag").setLevel(saved[2])


def test_libraries_print_only_warnings_by_default_and_agentrag_its_info(restore_logging):
    setup_logging(False)
    for name in ("httpx", "httpx2", "openai._base_client", "some.new.library", "uvicorn.error"):
        assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
        assert logging.getLogger(name).isEnabledFor(logging.WARNING), name
    assert logging.getLogger("agentrag.eval.runner").isEnabledFor(logging.INFO)
    assert not logging.getLogger("agentrag.eval.runner").isEnabledFor(logging.DEBUG)
    setup_logging(True)
    assert logging.getLogger("agentrag.eval.runner").isEnabledFor(logging.DEBUG)
    assert logging.getLogger("some.new.library").isEnabledFor(logging.INFO)


def test_an_eval_prints_no_http_request_lines(tmp_path, fake_kb, restore_logging):  # noqa: F811
    with StubOpenAIServer(reply=stub_reply) as srv:
        res = runner.invoke(app, eval_args(dataset(tmp_path, 2), tmp_path / "run",
                                           llm_yaml(tmp_path, "agent", srv.base_url)))
        assert srv.requests > 0
    assert res.exit_code == 0, res.output
    assert "HTTP Request" not in res.output and "items to evaluate" in " ".join(res.output.split())


def _error(output: str) -> str:
    assert "Traceback" not in output
    return " ".join(output[output.index("error:"):].split())


def test_an_agent_config_error_names_the_file_and_the_full_key(tmp_path, fake_kb, restore_logging):  # noqa: F811
    cfg = tmp_path / "run.yaml"
    cfg.write_text("agent_config:\n  max_stepz: 3\n")
    res = runner.invoke(app, [*eval_args(dataset(tmp_path), tmp_path / "run", "embedded"), "--config", str(cfg)])
    assert res.exit_code == 2, res.output
    err = _error(res.output)
    assert str(cfg) in err and "'agent_config.max_stepz'" in err and "(defaults)" not in err


def test_an_agent_config_error_from_set_says_set_and_the_full_key(tmp_path, fake_kb, restore_logging):  # noqa: F811
    res = runner.invoke(app, [*eval_args(dataset(tmp_path), tmp_path / "run", "embedded"),
                              "--set", "agent_config.max_steps=0"])
    assert res.exit_code == 2, res.output
    err = _error(res.output)
    assert "--set" in err and "agent_config.max_steps:" in err
