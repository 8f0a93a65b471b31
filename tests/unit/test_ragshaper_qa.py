from __future__ import annotations

import json
from typing import Any

import pytest
from test_ragshaper_support import verdict_reply

from agentrag.records import Step, Trajectory
from agentrag.synth.ragshaper.config import QAConfig
from agentrag.synth.ragshaper.filter import filter_trajectory
from agentrag.synth.ragshaper.qa import answer_in_question, check_qa, sentence_count, synthesize_qa
from agentrag.synth.ragshaper.schema import DocRef, PathRecord, TreeNode
from agentrag.testing import ScriptedLLM

DOCS = [DocRef(id="p2", title="Lysa", text="Lysa is a town founded in 1820 by the merchant Ott Brem."),
        DocRef(id="p3", title="Ott Brem", text="Ott Brem was a merchant whose company Brem & Sons opened in 1845."),
        DocRef(id="p4", title="Brem & Sons", text="Brem & Sons built the Orn bridge, finished in 1901."),
        DocRef(id="d1", title="Draft", text="In the 1900 draft, Brem & Sons built the Orn bridge, finished in 1899.",
               kb="distractor", distractor_type="doppelganger")]
STEPS = [{"hop": 1, "fact": "Lysa's founder", "evidence": "founded in 1820 by the merchant Ott Brem", "output": "Ott Brem"},
         {"hop": 2, "fact": "his company", "evidence": "Ott Brem was a merchant whose company Brem & Sons opened",
          "output": "Brem & Sons"},
         {"hop": 3, "fact": "their bridge", "evidence": "Brem & Sons built the Orn bridge, finished in 1901",
          "output": "1901"}]


def check(obj: dict[str, Any] | None, cfg: QAConfig | None = None, docs: list[DocRef] = DOCS) -> str | None:
    return check_qa(obj, cfg or QAConfig(), docs)[0]


#: a verifier that agrees with every item (computed answers, roles, needed hops)
KEEP = ScriptedLLM(default=lambda messages, **kw: verdict_reply(messages[-1].content or ""))


def stating(answer: str) -> list[DocRef]:
    """The path with one more main-KB document that states ``answer`` (the answer must be stated
    by a main-path document)."""
    return [*DOCS, DocRef(id="p9", title="Registry", text=f"The registry of the region lists {answer}.")]


def _qa(**kw: Any) -> dict[str, Any]:
    base = {"question": "Which year was the bridge of the founder's company finished?", "answer": "1901",
            "reasoning_steps": STEPS, "negative_aspect": []}
    base.update(kw)
    return base


def test_a_good_pair_is_accepted() -> None:
    assert check(_qa()) is None
    answer = "The U.S. Army Corps of Engineers"
    assert check(_qa(answer=answer), docs=stating(answer)) is None
    # a fuzzy quotation (a word changed, >= 80% of the tokens in order) still grounds its hop
    fuzzy = [*STEPS[:2], {**STEPS[2], "evidence": "Brem & Sons built the Orn bridge, completed in 1901"}]
    assert check(_qa(reasoning_steps=fuzzy)) is None


@pytest.mark.parametrize("obj,reason", [
    (None, "schema_failure"),
    (_qa(question=""), "schema_failure"),
    (_qa(answer=None), "schema_failure"),
    (_qa(reasoning_steps="three hops"), "schema_failure"),
    (_qa(answer="the bridge"), "answer_in_question"),
    (_qa(answer="Bridge!"), "answer_in_question"),
    (_qa(reasoning_steps=STEPS[:2]), "too_few_hops"),
    (_qa(reasoning_steps=[*STEPS[:2], {"hop": 3, "fact": "f3", "evidence": ""}]), "too_few_hops"),
    (_qa(answer="It was 1901. Work began in 1899."), "answer_too_long"),
    (_qa(answer=" ".join(["word"] * 25)), "answer_too_long"),
])
def test_rejection_reasons(obj: dict[str, Any] | None, reason: str) -> None:
    got = check(obj)
    assert got is not None and got.startswith(reason), got


def test_helpers() -> None:
    assert answer_in_question("Who founded Lysa?", "lysa")
    assert not answer_in_question("Who founded Lysander Town?", "Lysa")
    assert sentence_count("1901") == 1
    assert sentence_count("Born in 1901. Died in 1950.") == 2


def _path() -> tuple[PathRecord, list[TreeNode]]:
    nodes = [TreeNode(id="n0", observation="Ada"), TreeNode(id="n1", parent="n0", depth=1, intent="hop", docs=DOCS)]
    return PathRecord(id="s-n1", seed_id="s", seed="Ada", node_ids=["n0", "n1"], score=0, rank=0), nodes


def test_synthesize_qa_records_schema_failure_with_raw_output() -> None:
    path, nodes = _path()
    rec = synthesize_qa(ScriptedLLM(["{broken"]), path, nodes, QAConfig())
    assert rec.status == "rejected" and rec.reason and rec.reason.startswith("schema_failure")
    assert rec.provenance.raw_output == "{broken" and rec.provenance.stage == "qa"


def test_synthesize_qa_names_truncation_at_max_tokens() -> None:
    from agentrag.llm.base import Completion

    path, nodes = _path()
    cut = '{"question": "Who?", "reasoning_steps": [{"hop": 1, "fact": "a", "evidence": "b"}, {"hop": 2, "fa'
    rec = synthesize_qa(ScriptedLLM([Completion(text=cut, finish_reason="length")]), path, nodes,
                        QAConfig(max_tokens=40))
    assert rec.status == "rejected"
    assert rec.reason == ("schema_failure: parse_error: output cut off at max_tokens=40 before the JSON "
                          "object closed")
    assert rec.provenance.raw_output == cut


def test_synthesize_qa_accepts_and_keeps_provenance() -> None:
    path, nodes = _path()
    rec = synthesize_qa(ScriptedLLM([json.dumps(_qa())], model="m"), path, nodes, QAConfig())
    assert rec.status == "accepted" and rec.reason is None and rec.answer == "1901"
    assert rec.id == "s-n1-qa" and rec.provenance.model == "m" and len(rec.provenance.prompt_hash) == 16


def _answered(pred: str | None, **kw: Any) -> Trajectory:
    """A trajectory whose last turn gives ``pred`` inside answer tags."""
    steps = [Step(thought=f"<answer>{pred}</answer>")] if pred is not None else []
    return Trajectory(id="t", question="q", answer=pred, steps=steps, **kw)


@pytest.mark.parametrize("pred,kept", [
    ("1901", True), ("the 1901", True), ("In 1901", False), ("1900", False), (None, False),
    ("Orn river bridge", False),
])
def test_f1_filter_keeps_only_above_0_9(pred: str | None, kept: bool) -> None:
    traj = _answered(pred, metadata={"qa_id": "q1"})
    gold = "1901" if pred != "Orn river bridge" else "The Orn bridge"
    rec = filter_trajectory(traj, gold, 0.9)
    assert rec.kept is kept
    assert (rec.reason is None) is kept


def test_f1_filter_threshold_is_strict() -> None:
    # F1 of "a b c d e f g h i" vs "a b c d e f g h i j" = 2*1*0.9/1.9 = 0.947 > 0.9; 9 of 11 = 0.9 exactly
    traj = _answered("w1 w2 w3 w4 w5 w6 w7 w8 w9")
    assert filter_trajectory(traj, "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10", 0.9).kept
    traj2 = _answered("w1 w2 w3 w4 w5 w6 w7 w8 w9 x")
    assert filter_trajectory(traj2, "w1 w2 w3 w4 w5 w6 w7 w8 w9 y", 0.9).f1 == 0.9
    assert not filter_trajectory(traj2, "w1 w2 w3 w4 w5 w6 w7 w8 w9 y", 0.9).kept


INVENTED = [
    # the model claims three hops but the evidence is not in any document of the path
    ("invented evidence", [{**s, "evidence": f"the archives say fact number {i} holds"} for i, s in enumerate(STEPS)]),
    # three steps quoting the same document are one hop
    ("one document three times", [{**STEPS[2], "hop": i} for i in range(1, 4)]),
    # two real hops and one quoted from a distractor (K~ supports no hop)
    ("distractor quote", [*STEPS[:2], {**STEPS[2], "evidence": "In the 1900 draft, Brem & Sons built the Orn bridge"}]),
    # one-word evidence is not a quotation
    ("one-word evidence", [*STEPS[:2], {**STEPS[2], "evidence": "1901"}]),
    # a hop whose evidence is only half in the document (below the 0.8 containment)
    ("half quote", [*STEPS[:2], {**STEPS[2], "evidence": "Brem & Sons built a tower of glass in Kell long ago"}]),
    # more steps than documents, as small models write: the distinct-document count is what counts
    ("padded", [STEPS[0], STEPS[0], STEPS[1], STEPS[1]]),
]


@pytest.mark.parametrize("label,steps", INVENTED, ids=[i[0] for i in INVENTED])
def test_invented_hops_are_rejected(label: str, steps: list[dict[str, Any]]) -> None:
    reason, grounding = check_qa(_qa(reasoning_steps=steps), QAConfig(), DOCS)
    assert reason is not None and reason.startswith("too_few_hops"), (label, reason)
    assert len(grounding) == len(steps) and sum(g["doc_id"] is not None for g in grounding) < len(steps) or \
        len({g["doc_id"] for g in grounding if g["doc_id"]}) < 3


def test_no_documents_grounds_nothing() -> None:
    reason, grounding = check_qa(_qa(), QAConfig(), [])
    assert reason is not None and reason.startswith("not_stated: '1901' is stated by no evidence text")
    # the answer stated, but no quotation of the path: no hop grounded
    only = [DocRef(id="p9", title="Note", text="It was 1901.")]
    reason, grounding = check_qa(_qa(), QAConfig(), only)
    assert reason is not None and reason.startswith("too_few_hops: 0 grounded") and grounding


@pytest.mark.parametrize("question,answer,reason", [
    # a span of >= 3 answer words inside the question
    ("Which firm, later Brem & Sons Holdings, built the bridge?", "Brem & Sons Holdings Ltd", "answer_in_question"),
    ("Who, according to the Orn river survey, founded Lysa?", "the Orn river survey team", "answer_in_question"),
    # why / how explanations
    ("Why was the Orn bridge finished late?", "floods", "explanation_question"),
    ("How did Ott Brem found Lysa?", "by trading furs", "explanation_question"),
    ("What is the reason the Orn bridge was finished late?", "floods", "explanation_question"),
    ("What was the main cause of the delay of the founder's company bridge?", "floods", "explanation_question"),
    ("For what reason did Ott Brem leave Lysa?", "a fire", "explanation_question"),
    ("In which year was the Orn bridge finished?", "because the floods delayed it", "explanation_answer"),
    # more than one sentence
    ("In which year was the Orn bridge finished?", "1901. It opened in 1902.", "answer_too_long"),
])
def test_answer_rules(question: str, answer: str, reason: str) -> None:
    got = check(_qa(question=question, answer=answer))
    assert got is not None and got.startswith(reason), got


# ---------------------------------------------------------------- issue 24 item 4: both ways
GENERIC = [*STEPS[:2], {**STEPS[2], "evidence": "town founded in"}]  # a phrase found in p2, no content


def test_a_generic_phrase_grounds_no_hop() -> None:
    reason, grounding = check_qa(_qa(reasoning_steps=GENERIC), QAConfig(), DOCS)
    assert reason is not None and reason.startswith("too_few_hops") and "generic phrase" in reason
    assert grounding[2]["doc_id"] is None and grounding[2]["generic"] and grounding[2]["containment"] == 1.0
    # the same hop quoted with its facts grounds it (3+ content words: founded, 1820, ott, brem)
    real = [*STEPS[:2], {**STEPS[2], "evidence": "town founded in 1820 by the merchant Ott Brem"}]
    docs = [*DOCS, DocRef(id="p5", title="Orn", text="The Orn bridge was finished in 1901.")]
    steps = [STEPS[1], STEPS[2], {**real[2], "hop": 3}]
    assert check_qa(_qa(reasoning_steps=steps), QAConfig(), docs)[0] is None


@pytest.mark.parametrize("question,answer", [
    ("Which firm, Brem & Sons or its rival, built the Orn bridge for the founder?", "Brem and Sons Ltd"),
    ("Which firm, founded by Brem and Sons' owner, built the bridge?", "Brem & Sons"),
    ("In which country, once a US colony, was the founder's firm based?", "U.S."),
    ("Which U.S. Army unit repaired the bridge of the founder's firm?", "US Army"),
    ("Which city, later renamed Saint Lysa, did Ott Brem found?", "St. Lysa"),
    ("How many people, 1,200 of them merchants, lived in the founder's town?", "1200"),
])
def test_leakage_is_seen_on_normalized_forms(question: str, answer: str) -> None:
    got = check(_qa(question=question, answer=answer))
    assert got is not None and got.startswith("answer_in_question"), got


@pytest.mark.parametrize("answer,kept", [
    ("The U.S. Army Corps of Engineers", True),  # 6 words
    ("Brem & Sons Bridge and Tunnel Holdings Ltd", True),  # 8 words: the limit
    ("the company that the merchant Ott Brem had founded in Lysa", False),  # 11 words, one sentence
    ("it was finished in the year nineteen hundred and one after long delays", False),  # 14 words
])
def test_answers_are_short_phrases(answer: str, kept: bool) -> None:
    got = check(_qa(answer=answer), docs=stating(answer))
    assert (got is None) is kept, got
    assert kept or (got or "").startswith("answer_too_long: ")


@pytest.mark.parametrize("question,answer", [
    ("Was the bridge of the founder's company finished before 1905?", "yes"),  # yes/no
    ("Which opened first, the founder's company or his town?", "his town"),  # comparison: a choice
    ("Was the bridge finished in 1899, 1901 or 1905?", "1901"),
    ("How many years after the founder's town was his company's bridge finished?", "81"),  # computed
    ("How long after the company opened was the bridge finished?", "56 years"),  # computed
    ("What is the name of the firm whose founder also founded Lysa?", "Brem & Sons"),  # "what is" a name
    ("In which country is the town whose founder's firm built the bridge?", "the United States"),
])
def test_valid_yes_no_comparison_and_computed_answers_are_kept(question: str, answer: str) -> None:
    docs = DOCS if answer in ("yes", "his town", "1901", "81", "56 years", "Brem & Sons") else stating(answer)
    obj = _qa(question=question, answer=answer)
    assert check_qa(obj, QAConfig(), docs, KEEP)[0] is None
    if answer not in ("81", "56 years"):  # a computed number is kept only when the verifier computes it
        assert check(obj, docs=docs) is None


def test_value_questions_with_how_are_fine() -> None:
    obj = _qa(question="How many years after Lysa's founding was the founder's bridge finished?", answer="81")
    assert check_qa(obj, QAConfig(), DOCS, KEEP)[0] is None


def test_synthesize_qa_records_the_grounding() -> None:
    path, nodes = _path()
    rec = synthesize_qa(ScriptedLLM([json.dumps(_qa())]), path, nodes, QAConfig())
    assert [g["doc_id"] for g in rec.grounding] == ["p2", "p3", "p4"]
    assert all(g["containment"] >= 0.8 for g in rec.grounding)
