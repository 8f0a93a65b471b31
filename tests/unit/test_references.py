"""References are read once, in the library: an ``--llm`` reference into an LLMRef that checks,
pre-flight, defaults and the items in flight all read; eval's backend defaults are the same
from the CLI and from ``run_eval``."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrag.errors import UserError
from agentrag.eval.defaults import EMBEDDED_AGENT_BUDGET, is_embedded, resolved_eval_config
from agentrag.eval.runner import EvalConfig
from agentrag.llm.adaptive import EMBEDDED_ITEMS_IN_FLIGHT, REMOTE_ITEMS_IN_FLIGHT, default_items_in_flight
from agentrag.llm.reference import LLMRef, config_llm_refs, parse_llm_ref


def yaml_ref(tmp_path: Path, backend: str) -> str:
    path = tmp_path / f"{backend}.yml"
    path.write_text(f"backend: {backend}\nmodel: m\n" + ("base_url: http://127.0.0.1:9/v1\n" if backend == "openai" else ""))
    return str(path)


def test_one_parse_answers_every_question_about_a_reference(tmp_path: Path) -> None:
    remote = parse_llm_ref("openai:m@http://127.0.0.1:9/v1")
    assert remote.is_remote and not remote.is_embedded and remote.endpoint == "http://127.0.0.1:9/v1"
    assert parse_llm_ref(remote) is remote  # an LLMRef is not read again
    emb = parse_llm_ref("embedded")
    assert emb.is_embedded and not emb.is_remote and emb.endpoint == ""
    # a YAML file is the same reference as the string it spells: read by the same parser
    assert parse_llm_ref(yaml_ref(tmp_path, "openai")).is_remote
    assert parse_llm_ref(yaml_ref(tmp_path, "embedded")).is_embedded
    # the identity leaves the endpoint out (a moved server is the same configuration)
    assert parse_llm_ref("openai:m@http://a:1/v1").identity() == parse_llm_ref("openai:m@http://b:2/v1").identity()
    assert parse_llm_ref("openai:m@http://a:1/v1").identity() != parse_llm_ref("openai:n@http://a:1/v1").identity()
    with pytest.raises(UserError, match="not understood"):
        parse_llm_ref("gpt-4")


def test_the_items_in_flight_read_the_parsed_reference(tmp_path: Path) -> None:
    assert default_items_in_flight("embedded") == EMBEDDED_ITEMS_IN_FLIGHT
    assert default_items_in_flight("openai:m@http://h:1/v1") == REMOTE_ITEMS_IN_FLIGHT
    assert default_items_in_flight(yaml_ref(tmp_path, "openai")) == REMOTE_ITEMS_IN_FLIGHT
    assert default_items_in_flight("not a reference") == EMBEDDED_ITEMS_IN_FLIGHT  # the input check names it


def test_config_refs_list_every_role_once() -> None:
    cfg = EvalConfig(llm="openai:m@http://h:1/v1", judge="openai:m@http://h:1/v1",
                     agent_config={"executor_llm": "embedded"})
    assert list(config_llm_refs(cfg)) == [("llm", "openai:m@http://h:1/v1"), ("agent_config.executor_llm", "embedded")]


def test_eval_backend_defaults_live_in_the_library(tmp_path: Path) -> None:
    """The embedded CPU budgets come from agentrag.eval.defaults for the CLI and run_eval alike."""
    import agentrag.cli.eval as cli_eval

    assert not hasattr(cli_eval, "EMBEDDED_AGENT_BUDGET") and not hasattr(cli_eval, "resolved_eval_config")
    got = resolved_eval_config(EvalConfig(llm="embedded", agent="react"))
    assert {k: got.agent_config[k] for k in EMBEDDED_AGENT_BUDGET} == EMBEDDED_AGENT_BUDGET
    assert resolved_eval_config(got) == got  # resolving twice changes nothing
    mine = resolved_eval_config(EvalConfig(llm="embedded", agent="react", agent_config={"max_steps": 7}))
    assert mine.agent_config["max_steps"] == 7  # a value the user set wins
    remote = resolved_eval_config(EvalConfig(llm="openai:m@http://h:1/v1", agent="react"))
    assert remote.agent_config["max_steps"] != EMBEDDED_AGENT_BUDGET["max_steps"]
    assert is_embedded(yaml_ref(tmp_path, "embedded")) and not is_embedded("nonsense") and not is_embedded(None)


def test_preflight_takes_a_parsed_reference() -> None:
    from agentrag.llm.preflight import preflight_llm

    preflight_llm(LLMRef("embedded", parse_llm_ref("embedded").config))  # no endpoint: no request
    with pytest.raises(UserError, match="does not answer"):
        preflight_llm(parse_llm_ref("openai:m@http://127.0.0.1:9/v1"))
