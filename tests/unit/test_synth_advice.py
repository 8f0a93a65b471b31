"""An empty or near-empty run explains itself in report.md and report.html (the stage, its top
reasons with counts, advice), every piece of advice the code can emit is followed here on a
scripted-model run and raises the stage's output, and every synthesizer's funnel adds up stage to
stage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_annotated_teacher import MUSIQUE, TWOWIKI, _passages, _write
from test_reasonrag_faults import _fails_at
from test_reasonrag_pipeline import QUESTION, config, policy, retriever

from agentrag.errors import LLMError
from agentrag.records import Message, Passage
from agentrag.synth import advice
from agentrag.synth.annotated import AnnotatedRunConfig, run_annotated
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.testing import FakeRetriever, ScriptedLLM


def _row(m: dict[str, Any], stage: str) -> dict[str, Any]:
    return next(r for r in m["funnel"] if r["stage"] == stage)


def _reports(out: Path) -> tuple[str, str]:
    return (out / "report.md").read_text(encoding="utf-8"), (out / "report.html").read_text(encoding="utf-8")


def _reasonrag(out: Path, llm: Any = None, **over: Any) -> dict[str, Any]:
    return run_reasonrag(config(**over), out, llm=ScriptedLLM(default=llm or policy), retriever=retriever(),
                         questions=[QUESTION])


def _advice_in_reports(out: Path, hint: str, stage: str) -> None:
    """The report (both forms) names the stage and carries the advice the terminal prints; the
    run's funnel adds up (an emptied funnel too)."""
    import html

    assert advice.funnel_breaks(json.loads((out / "metrics.json").read_text())["funnel"]) == []

    md, page = _reports(out)
    for text in (md, html.unescape(page)):
        assert "Why this run produced" in text and f"stage '{stage}'" in text and hint in text, text[:2000]


# ---- each advice, followed ----

def test_min_gap_advice_followed_raises_the_pairs(tmp_path: Path) -> None:
    cfg_gap = config().pairs.model_copy(update={"min_gap": 1.0})
    empty = _reasonrag(tmp_path / "a", pairs=cfg_gap)
    assert _row(empty, "pairs")["out"] == 0 and "min_gap" in _row(empty, "pairs")["rejected"]
    hint = advice.REASON_HINTS["min_gap"]
    _advice_in_reports(tmp_path / "a", hint, "pairs")
    followed = _reasonrag(tmp_path / "b", pairs=cfg_gap.model_copy(update={"min_gap": 0.05}))  # "lower pairs.min_gap"
    assert _row(followed, "pairs")["out"] > 0


def _annotated(out: Path, retriever: Any, **over: Any) -> dict[str, Any]:
    files = [_write(out.parent, "mus_train.jsonl", [MUSIQUE]), _write(out.parent, "wiki_train.jsonl", [TWOWIKI])]
    return run_annotated(AnnotatedRunConfig(datasets=files, **over), out, retriever=retriever)


def test_support_retrieved_advice_followed_raises_the_kept_paths(tmp_path: Path) -> None:
    empty = _annotated(tmp_path / "a", FakeRetriever(_passages()), top_k=1, doc_chars=20)
    assert _row(empty, "gates")["out"] == 0 and "support_retrieved" in _row(empty, "gates")["rejected"]
    hint = advice.REASON_HINTS["support_retrieved"]
    _advice_in_reports(tmp_path / "a", hint, "gates")
    assert "--llm" not in _reports(tmp_path / "a")[0]  # no model to change
    followed = _annotated(tmp_path / "b", FakeRetriever(_passages()), top_k=3, doc_chars=400)  # raise top_k, doc_chars
    assert _row(followed, "gates")["out"] > 0


def _weak_curator(messages: list[Message], **kw: Any) -> Any:
    """A curator that does not follow the instructions: its QA answers explain instead of naming."""
    from test_ragshaper_support import curator_reply

    reply = curator_reply(messages, **kw)
    if ((kw.get("response_format") or {}).get("json_schema") or {}).get("name") == "qa_pair":
        qa = json.loads(reply)
        qa["answer"] = f"Judging from all the documents I read, I believe it was probably {qa['answer']}"
        return json.dumps(qa)
    return reply


def test_stronger_model_advice_followed_raises_the_questions(tmp_path: Path) -> None:
    from test_ragshaper_pipeline import _cfg, _components
    from test_ragshaper_support import ShaperRun

    weak = ShaperRun(tmp_path / "a", _cfg(), _components(curator=ScriptedLLM(default=_weak_curator))).run(
        ["Ada Varn", "Ott Brem"])
    (hint,) = [h for _, h in advice.WORD_HINTS]
    assert _row(weak, "qa")["out"] == 0 and _row(weak, "qa")["rejected"], _row(weak, "qa")
    _advice_in_reports(tmp_path / "a", hint, "qa")
    followed = ShaperRun(tmp_path / "b", _cfg(), _components()).run(["Ada Varn", "Ott Brem"])  # a stronger model
    assert _row(followed, "qa")["out"] > 0 and _row(followed, "export")["out"] > 0


def test_a_stage_given_nothing_is_named_with_its_feeder(tmp_path: Path) -> None:
    """A model whose every expansion repeats its sibling: the MCTS runs, no sibling pair exists."""
    m = _reasonrag(tmp_path / "a", llm=lambda messages, **kw: "I think the answer is in the documents.")
    lines = advice.explain_empty(m["funnel"])
    assert lines[0].startswith("nothing was produced: stage 'pairs' got no sibling pairs from 'mcts' (1 out)")


def test_rerun_advice_followed_finishes_the_unfinished_items(tmp_path: Path) -> None:
    out = tmp_path / "a"
    m = _reasonrag(out, llm=_fails_at(2, LLMError("HTTP 503", is_retryable=True)))
    stage = advice.empty_stage(m["funnel"])
    assert m["unfinished"] == 1 and stage is not None and stage["unfinished"] == 1
    assert advice.funnel_breaks(m["funnel"]) == []  # the unfinished item is counted where it stopped
    _advice_in_reports(out, advice.RERUN, str(stage["stage"]))
    again = _reasonrag(out)  # "rerun the same command"
    assert again["unfinished"] == 0 and _row(again, str(stage["stage"]))["out"] > 0


def test_every_advice_string_the_code_can_emit_is_followed_above() -> None:
    tested = {advice.REASON_HINTS["min_gap"], advice.REASON_HINTS["support_retrieved"], advice.RERUN,
              *(h for _, h in advice.WORD_HINTS)}
    emitted = {*advice.REASON_HINTS.values(), *(h for _, h in advice.WORD_HINTS), advice.RERUN}
    assert emitted == tested
    assert not any("max_tokens" in h for h in emitted)  # followed on the embedded model, it did not help


# ---- near-empty ----

def test_a_near_empty_run_explains_itself_in_both_reports(tmp_path: Path, data_dir: Path) -> None:
    rows = [json.loads(x) for x in (data_dir / "musique" / "train_100.jsonl").read_text().splitlines()[:12]]
    passages = [Passage(id=f"{r['id']}-{p['idx']}", title=p["title"], text=p["paragraph_text"])
                for r in rows for p in r["paragraphs"] if p["is_supporting"]]
    src = tmp_path / "mus_train.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    low = run_annotated(AnnotatedRunConfig(datasets=[str(src)], top_k=5, doc_chars=60), tmp_path / "a",
                        retriever=FakeRetriever(passages))
    gates = _row(low, "gates")
    assert gates["in"] >= advice.NEAR_EMPTY_MIN_IN and 0 < gates["out"] < advice.NEAR_EMPTY * gates["in"], gates
    md, page = _reports(tmp_path / "a")
    top = max(gates["rejected"], key=gates["rejected"].get)
    for text in (md, page):
        assert "Why this run produced little" in text and f"Little was produced: stage &#x27;gates&#x27; kept " \
            f"{gates['out']} of {gates['in']}".replace("&#x27;", "'" if text is md else "&#x27;") in text
        assert f"{top} ({gates['rejected'][top]} of {gates['in']})" in text and "raise top_k or doc_chars" in text
    followed = run_annotated(AnnotatedRunConfig(datasets=[str(src)], top_k=5, doc_chars=400), tmp_path / "b",
                             retriever=FakeRetriever(passages))
    assert _row(followed, "gates")["out"] > max(gates["out"], advice.NEAR_EMPTY * gates["in"])
    assert "Why this run produced" not in _reports(tmp_path / "b")[0]


def test_near_empty_is_defined_and_a_full_run_says_nothing() -> None:
    funnel = [{"stage": "a", "in": 40, "out": 40, "rejected": {}},
              {"stage": "b", "in": 40, "out": 3, "rejected": {"x_parse": 30, "y": 5, "z": 1, "w": 1}},
              {"stage": "c", "in": 3, "out": 3, "rejected": {}}]
    lines = advice.explain_empty(funnel, {"llm": "m"})
    assert lines[0] == "little was produced: stage 'b' kept 3 of 40 (8%, under 10%)."
    assert lines[1] == "  top rejections: x_parse (30 of 40), y (5 of 40), z (1 of 40)"
    assert "--llm" in lines[2]
    funnel[1]["out"] = funnel[2]["in"] = funnel[2]["out"] = 4
    assert advice.explain_empty(funnel) == []  # 10% is not under 10%
    assert advice.explain_empty([{"stage": "a", "in": 9, "out": 0 + 1, "rejected": {"y": 8}}]) == []  # too few


# ---- funnels add up, per synthesizer ----

def test_funnel_breaks_finds_an_in_that_is_not_the_feeders_out() -> None:
    rows = [{"stage": "a", "input": "x", "output": "a.jsonl", "in": 5, "out": 4, "unit": "items"},
            {"stage": "b", "input": "a.jsonl", "output": "b.jsonl", "in": 5, "out": 2, "unit": "items"},
            {"stage": "c", "input": "a.jsonl", "output": "c.jsonl", "in": 9, "out": 9, "unit": "sub-questions"}]
    assert advice.funnel_breaks(rows) == ["b: in 5 (+ 0 unfinished) but a put out 4 (items)"]
    assert advice.in_from(rows, 2) == "sub-questions of a's output (counted here)"
    rows[1]["in"] = 4
    assert advice.funnel_breaks(rows) == [] and advice.in_from(rows, 1) == "out of a"
    assert advice.in_from(rows, 0) == "items (counted here)"
    rows[1].update({"in": 3, "unfinished": 1})  # an outage left one unfinished: handed 4, counted 3
    assert advice.funnel_breaks(rows) == [] and advice.in_from(rows, 1) == "out of a (less the unfinished)"


def _runs(name: str, out: Path, data_dir: Path) -> dict[str, Any]:
    from test_synth_finished import _evipath, _ragshaper, _tracer

    if name == "reasonrag":
        return _reasonrag(out)
    if name == "annotated":
        return _annotated(out, FakeRetriever(_passages()), top_k=2)
    return {"ragshaper": _ragshaper, "tracer": _tracer, "evipath": _evipath}[name](out, data_dir)()


@pytest.mark.parametrize("name", ["ragshaper", "evipath", "reasonrag", "tracer", "annotated"])
def test_every_synthesizers_funnel_adds_up(tmp_path: Path, data_dir: Path, name: str) -> None:
    m = _runs(name, tmp_path / "run", data_dir)
    funnel = m["funnel"]
    assert advice.funnel_breaks(funnel) == []
    # each stage's in is its feeder's out, or the stage says it counts another unit
    for i, row in enumerate(funnel[1:], start=1):
        f = advice.feeder(funnel, i)
        said = advice.in_from(funnel, i)
        assert (f is not None and f["out"] == row["in"] + row["unfinished"] and said.startswith("out of ")) or \
            said.endswith("(counted here)") and (f is None or f["unit"] != row["unit"]), (row, said)
    if name == "evipath":  # the 2-, 2- and 4-hop items of the fake: one sub-question per planned step
        plans = [json.loads(x) for x in (tmp_path / "run" / "plans.jsonl").read_text().splitlines()]
        assert _row(m, "sub_answers")["in"] == sum(len(p["plan"]) for p in plans) == 8
        assert _row(m, "gates")["in"] == _row(m, "paths")["out"]
    if name == "ragshaper":
        assert max(m["seconds_per_seed"].values()) <= m["wall_s"]
        assert _row(m, "export")["in"] == _row(m, "filter")["out"]
        assert _row(m, "tag")["in"] == _row(m, "elicit")["out"]


def test_evipath_funnel_adds_up_when_a_plan_and_a_path_are_rejected(tmp_path: Path, data_dir: Path) -> None:
    """EviPath's "in" follows the "out" above it also when items drop out: one plan does not parse,
    one path ends without an answer."""
    from agentrag.synth.evipath import EviPathRunConfig, run_evipath
    from agentrag.synth.evipath.planning import PLAN_SYSTEM, STEP_SYSTEM
    from evipath_fakes import CleanGoldLLM, ContentWordEmbedder

    musique = data_dir / "musique" / "train_100.jsonl"
    recs = [json.loads(x) for x in musique.read_text().splitlines()[:4]]

    class Broken(CleanGoldLLM):
        def _reply(self, messages: list[Message]) -> str:
            system, user = messages[0].content or "", messages[-1].content or ""
            if system == PLAN_SYSTEM and recs[0]["question"] in user:
                return "I cannot plan this."
            if system == STEP_SYSTEM and recs[1]["question"] in user:
                return "<think>Still thinking.</think>"
            return super()._reply(messages)

    m = run_evipath(EviPathRunConfig(datasets=[str(musique)], limit=4), tmp_path / "run", planner=Broken(recs),
                    embedder=ContentWordEmbedder())
    rows = {r["stage"]: r for r in m["funnel"]}
    assert rows["plans"]["out"] < rows["plans"]["in"] or rows["paths"]["out"] < rows["paths"]["in"], rows
    assert advice.funnel_breaks(m["funnel"]) == []
    assert rows["paths"]["in"] == rows["plans"]["out"] and rows["gates"]["in"] == rows["paths"]["out"]
