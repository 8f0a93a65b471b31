"""search_r1's prompt_template: a file with {question} (e.g. the template a Search-R1 checkpoint was
trained with) replaces agentrag's own wording; a bad file is a config error naming the key."""

from __future__ import annotations

import pytest

from agentrag.agents import agent_config, build_agent
from agentrag.agents.prompts import SEARCH_R1_USER
from agentrag.errors import UserError
from agentrag.records import Passage, QAItem
from agentrag.testing import FakeRetriever, ScriptedLLM

ITEM = QAItem(id="q", question="Who wrote {braces} here?", golden_answers=["x"])


def _first_prompt(**cfg) -> str:
    llm = ScriptedLLM(["<answer>x</answer>"])
    build_agent("search_r1", llm, FakeRetriever([Passage(id="p", title="t", text="x")]), **cfg).run(ITEM)
    return llm.requests[0]["messages"][0].content


def test_default_is_agentrags_wording():
    assert _first_prompt() == SEARCH_R1_USER.format(question=ITEM.question)


def test_a_template_file_is_used_verbatim_with_the_question_in_place(tmp_path):
    path = tmp_path / "search_r1_prompt.txt"
    path.write_text("Rules {like these} stay. Question: {question}\n", encoding="utf-8")
    assert _first_prompt(prompt_template=str(path)) == "Rules {like these} stay. Question: Who wrote {braces} here?\n"


@pytest.mark.parametrize("content,why", [(None, "cannot read"), ("no field here", "no {question} field")])
def test_a_bad_template_is_a_config_error_naming_the_key(tmp_path, content, why):
    path = tmp_path / "t.txt"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserError) as err:
        agent_config("search_r1", prompt_template=str(path), source="run.yaml", prefix="agent_config.")
    msg = str(err.value)
    assert "agent_config.prompt_template" in msg and why in msg and "run.yaml" in msg
