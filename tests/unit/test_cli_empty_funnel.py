"""Empty funnels explain themselves (issue 28): the last lines name the stage that ended at 0, its top
rejection reason and the setting that addresses it, and no path is printed for a file not written."""

from __future__ import annotations

import pytest
from test_reasonrag_faults import cli, fake_kb, reply  # noqa: F401  (fake_kb: the autouse --kb fake)

from agentrag.cli.funnel import empty_stage, explain_empty, hint_for, written
from agentrag.testing import StubOpenAIServer

RAGSHAPER_EMPTY = [
    {"stage": "explore", "in": 1, "out": 1, "rejected": {}, "unfinished": 0},
    {"stage": "distractors", "in": 0, "out": 0, "rejected": {}, "unfinished": 0},
    {"stage": "paths", "in": 1, "out": 1, "rejected": {}, "unfinished": 0},
    {"stage": "qa", "in": 3, "out": 0, "rejected": {"explanation_answer": 2, "answer_too_long": 1}, "unfinished": 0},
    {"stage": "elicit", "in": 0, "out": 0, "rejected": {}, "unfinished": 0},
    {"stage": "export", "in": 0, "out": 0, "rejected": {}, "unfinished": 0},
]


def test_the_stage_that_emptied_the_funnel_its_top_reason_and_the_fix():
    lines = explain_empty(RAGSHAPER_EMPTY, {"llm": "embedded", "qa": {"max_answer_words": 8}})
    assert lines[0].startswith("nothing was produced: stage 'qa' ended at 0 (3 in, 0 out)")
    assert "top rejections: explanation_answer (2 of 3), answer_too_long (1 of 3)" in lines[1]
    assert "--llm" in lines[2]
    assert "qa.*" in lines[3]


def test_a_funnel_with_output_or_an_earlier_empty_stage_that_was_not_the_end_says_nothing():
    full = [dict(r, out=max(r["out"], 1)) for r in RAGSHAPER_EMPTY]
    assert explain_empty(full) == [] and empty_stage(full) is None
    # a side stage at 0 (no distractor calls) does not count when the funnel ends with output
    assert explain_empty([*RAGSHAPER_EMPTY[:3], {"stage": "export", "in": 1, "out": 1, "rejected": {}}]) == []


def test_no_input_at_all_is_said_too():
    assert "no stage had any input" in explain_empty([{"stage": "qa", "in": 0, "out": 0, "rejected": {}}])[0]


@pytest.mark.parametrize("reason,word", [("min_gap", "pairs.min_gap"), ("support_retrieved", "doc_chars"),
                                         ("parse_error", "--llm"), ("answer_format_error", "--llm"),
                                         ("context_limit", "no tested advice"), ("something_new", "no tested advice")])
def test_each_reason_gets_tested_advice_or_says_it_has_none(reason, word):
    """Only advice a test followed and saw help (tests/unit/test_synth_advice.py); "raise
    max_tokens" is gone (following it did not help)."""
    assert word in hint_for(reason) and "max_tokens" not in hint_for(reason)


def test_written_lists_only_non_empty_files(tmp_path):
    (tmp_path / "a").write_text("x")
    (tmp_path / "b").write_text("")
    assert written(tmp_path / "a", tmp_path / "b", tmp_path / "c") == [str(tmp_path / "a")]


def test_reasonrag_with_no_pair_names_min_gap_and_prints_no_missing_path(tmp_path):
    """The real pipeline (scripted policy over HTTP): every pair is under a min_gap no gap reaches."""
    with StubOpenAIServer(reply=reply) as server:
        res = cli(tmp_path, server.base_url, "--set", "pairs.min_gap=1.0")
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "nothing was produced: stage 'pairs' ended at 0" in out, res.output
    assert "top rejections: min_gap" in out and "lower pairs.min_gap" in out
    assert "trl_dpo.jsonl" not in out  # not written: not printed
    assert "report: " in out


def test_every_synthesizer_prints_its_funnel_one_way(monkeypatch):
    """One printer for the four synth commands: stage names padded to the longest, rejections by
    reason, and an outage's unfinished items named."""
    import agentrag.cli.funnel as funnel

    lines: list[str] = []
    monkeypatch.setattr(funnel.console, "print", lambda text, **kw: lines.append(text))
    funnel.print_funnel([
        {"stage": "items", "in": 10, "out": 9, "rejected": {"annotation": 1}, "unfinished": 0},
        {"stage": "conversations", "in": 9, "out": 6, "rejected": {"failed_gates": 2}, "unfinished": 1},
    ])
    assert lines == ["  items            10 -> 9     annotation: 1",
                     "  conversations     9 -> 6     failed_gates: 2  unfinished: 1"]


def _synth_commands():
    import typer

    from agentrag.cli.main import app

    root = typer.main.get_command(app)
    synth = root.commands["synth"]
    for name, cmd in synth.commands.items():
        opts = {o for p in cmd.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
                if o.startswith("--")}
        yield name, opts


def test_advice_names_only_options_the_command_has():
    import re

    from agentrag.cli.funnel import REASON_HINTS, WORD_HINTS

    reasons = [*REASON_HINTS, *(words[0] + "_x" for words, _ in WORD_HINTS), "something_else"]
    for name, opts in _synth_commands():
        assert "--print-config" in opts, name
        lines = [line for r in reasons for line in explain_empty(
            [{"stage": "qa", "in": 3, "out": 0, "rejected": {r: 3}}], {"qa": {}}, opts)]
        lines += explain_empty([{"stage": "qa", "in": 0, "out": 0, "rejected": {}}], None, opts)
        lines += explain_empty([{"stage": "qa", "in": 2, "out": 0, "rejected": {}}], None, opts)
        named = {o for line in lines for o in re.findall(r"--[a-z][\w-]*", line)}
        assert named <= opts, (name, named - opts)
    evipath = dict(_synth_commands())["evipath"]
    assert "--seeds" not in " ".join(explain_empty([{"stage": "qa", "in": 0, "out": 0, "rejected": {}}], None,
                                                   evipath))


def test_advice_names_only_settings_of_the_run_config():
    """Two synthesizers name a reason alike: the Tracer's "min_gap" would get no ReasonRAG advice
    (pairs.min_gap is not its setting); ReasonRAG keeps it; the annotated teacher (no LLM) gets no
    model advice."""
    from agentrag.cli.funnel import explain_empty

    funnel = [{"stage": "pairs", "in": 2, "out": 0, "rejected": {"min_gap": 2}}]
    tracer = " ".join(explain_empty(funnel, config={"llm": "x", "atomic": {}, "compose": {}}))
    assert "pairs.min_gap" not in tracer and "no tested advice" in tracer
    reasonrag = " ".join(explain_empty(funnel, config={"llm": "x", "mcts": {}, "pairs": {}, "value": {}}))
    assert "lower pairs.min_gap" in reasonrag
    gates = [{"stage": "gates", "in": 12, "out": 0, "rejected": {"answer_grounded": 12}}]
    assert "--llm" not in " ".join(explain_empty(gates, config={"top_k": 5, "doc_chars": None}))
    assert "--llm" in " ".join(explain_empty(gates, config={"llm": "x"}))
