"""Each §3.2 filter and each §3.3 verification stage rejects a hand-built bad item for its reason."""

from __future__ import annotations

import json
from typing import Any

from tracer_support import A2Q, Q1, Q2

from agentrag.records import Message
from agentrag.synth.tracer.atomic import filter_pair
from agentrag.synth.tracer.config import TracerConfig
from agentrag.synth.tracer.oracle import Oracle
from agentrag.synth.tracer.schema import AtomicPair, Hop
from agentrag.synth.tracer.verify import irreducibility, semantic, structural, verify
from agentrag.testing import ScriptedLLM

DOC = ("Amherst, Victoria", "By 1857 a Wesleyan church had been established in the town.")


def _ans(a: str) -> str:
    return json.dumps({"answer": a})


def _oracle(script: list[Any], judge: list[Any] | None = None) -> tuple[Oracle, ScriptedLLM, ScriptedLLM]:
    llm, jd = ScriptedLLM(script), ScriptedLLM(judge or [])
    return Oracle(llm, jd, TracerConfig()), llm, jd


def _pair(q: str = Q1, a: str = "Wesleyan church") -> AtomicPair:
    return AtomicPair(id="p", question=q, answer=a)


# --- §3.2 atomic filters ---------------------------------------------------------------------------
def test_malformed_pairs_are_rejected_without_llm_calls() -> None:
    o, llm, _ = _oracle([])
    for q, a, why in [("Amherst?", "x", "not a question"), (Q1, "", "empty"),
                      ("Which Wesleyan church was in Amherst in 1857?", "Wesleyan church", "answer appears"),
                      (Q1, "a very long answer that goes on for very many words", "longer than")]:
        out = filter_pair(o, _pair(q, a), DOC)
        assert out.status == "rejected" and out.reason and out.reason.startswith("malformed") and why in out.reason
    assert llm.calls == 0


def test_numeric_only_answer_rejected() -> None:
    o, llm, _ = _oracle([])
    out = filter_pair(o, _pair("In which year was the church in Amherst established?", "1,857"), DOC)
    assert out.reason == "numeric_answer: the answer is only numbers" and llm.calls == 0
    o, _, _ = _oracle([_ans("unknown"), _ans("4,586 K")])  # a value with its unit goes on to the LLM filters
    assert filter_pair(o, _pair("What is the effective temperature of Omega Persei?", "4,586 K"), DOC).status == \
        "accepted"


def test_parametric_answer_rejected() -> None:
    o, llm, jd = _oracle([_ans("Wesleyan church")])
    out = filter_pair(o, _pair(), DOC)
    assert out.reason == "parametric: answered correctly without the document"
    assert llm.calls == 1 and jd.calls == 0  # exact match: no judge call
    assert "Documents:" not in (llm.requests[0]["messages"][-1].content or "")


def test_not_grounded_rejected_by_the_judge() -> None:
    o, llm, jd = _oracle([_ans("unknown"), _ans("Anglican chapel")], [json.dumps({"reason": "no", "score": 0})])
    out = filter_pair(o, _pair(), DOC)
    assert out.reason == "not_grounded: not answered correctly with the document"
    assert llm.calls == 2 and jd.calls == 1
    assert out.checks[-1].judge_score == 0 and out.checks[-1].answer == "Anglican chapel"


def test_judge_partial_credit_passes_grounding_and_aliases_count() -> None:
    o, _, jd = _oracle([_ans("unknown"), _ans("a Methodist chapel of the Wesleyans")],
                       [json.dumps({"reason": "partly", "score": 1})])
    out = filter_pair(o, _pair(), DOC)
    assert out.status == "accepted" and jd.calls == 1
    o, _, jd = _oracle([_ans("unknown"), _ans("Methodist church")])
    pair = AtomicPair(id="p", question=Q1, answer="Wesleyan church", aliases=["Methodist church"])
    assert filter_pair(o, pair, DOC).status == "accepted" and jd.calls == 0


def test_unparsable_answer_fails_the_gate_with_the_parse_error() -> None:
    o, _, _ = _oracle([_ans("unknown"), "garbage"])
    out = filter_pair(o, _pair(), DOC)
    assert out.status == "rejected" and out.reason and "grounded: parse_error" in out.reason
    assert out.checks[-1].raw == ["garbage"]


# --- §3.3 verification -----------------------------------------------------------------------------
def _hop1() -> Hop:
    return Hop(level=1, template="atomic", atomic_question=Q1, atomic_answer="Wesleyan church", doc_id="d1",
               doc_title=DOC[0], doc_text=DOC[1], question=Q1, answer="Wesleyan church", verified=True)


def _hop2(question: str = Q2, atomic_q: str = A2Q, template: str = "inference", answer: str = "Arminianism") -> Hop:
    return Hop(level=2, template=template, atomic_question=atomic_q, atomic_answer=answer,  # type: ignore[arg-type]
               doc_id="d2", doc_title="Wesleyanism", doc_text="The Wesleyan church is associated with Arminianism.",
               question=question, answer=answer)


def test_structural_rejects_leakage_concatenation_and_missing_bridge() -> None:
    assert structural([_hop1()], _hop2()).passed
    leak = structural([_hop1()], _hop2("Which theological perspective is the Wesleyan church of Amherst, Victoria "
                                       "established by 1857 associated with?"))
    assert not leak.passed and "leakage" in leak.reason and "Wesleyan church" in leak.reason
    concat = structural([_hop1()], _hop2("What type of church was established in Amherst, Victoria by 1857 and "
                                         "which theological perspective is it associated with?"))
    assert not concat.passed and "structural: trivial_concatenation" in concat.reason
    unbridged = structural([_hop1()], _hop2(atomic_q="Which theological perspective did John Smith hold?"))
    assert not unbridged.passed and "structural: not_bridged" in unbridged.reason
    drops = structural([_hop1()], _hop2("Which theological perspective is associated with a famous chapel of 1857?"))
    assert not drops.passed and "drops the content" in drops.reason
    final = structural([_hop1()], _hop2("Is Arminianism the perspective of the type of church established in "
                                        "Amherst, Victoria by 1857?"))
    assert not final.passed and "final answer" in final.reason


def test_structural_comparison_answer_must_be_a_named_option() -> None:
    h1 = Hop(level=1, template="atomic", atomic_question="What is the effective temperature of Omega Persei?",
             atomic_answer="4,586 K", doc_id="d1", doc_title="Omega Persei", question="What is the effective "
             "temperature of Omega Persei?", answer="4,586 K", verified=True)

    def comp(q: str, a: str) -> Hop:
        return Hop(level=2, template="comparison", atomic_question="What is the effective temperature of HD 195564?",
                   atomic_answer="5,421 K", doc_id="d2", doc_title="HD 195564", question=q, answer=a)

    good = "Which star has a higher effective temperature, Omega Persei or HD 195564?"
    assert structural([h1], comp(good, "HD 195564")).passed
    bad = structural([h1], comp(good, "Vega"))
    assert not bad.passed and "structural: comparison_answer" in bad.reason
    leak = structural([h1], comp("Which star is hotter, Omega Persei at 4,586 K or HD 195564?", "HD 195564"))
    assert not leak.passed and "4,586 K" in leak.reason


def test_semantic_auditor_rejection_and_parse_failure() -> None:
    o, llm, _ = _oracle([json.dumps({"reason": "conflates two churches named Wesleyan", "failure": "false_entity_link",
                                     "valid": False})])
    c = semantic(o, [_hop1()], _hop2())
    assert c.passed is False and c.reason == "semantic: false_entity_link: conflates two churches named Wesleyan"
    prompt = llm.requests[0]["messages"][-1].content or ""
    assert DOC[1] in prompt and "The Wesleyan church is associated with Arminianism." in prompt  # the documents
    o, _, _ = _oracle([json.dumps({"reason": "vague", "valid": False})])  # no rubric item named: "other"
    assert semantic(o, [_hop1()], _hop2()).reason == "semantic: other: vague"
    o, _, _ = _oracle([json.dumps({"reason": "ok", "failure": "trivial_concatenation", "valid": True})])
    c = semantic(o, [_hop1()], _hop2())  # a named failure is a rejection even when "valid" says true
    assert c.passed is False and c.reason.startswith("semantic: trivial_concatenation")
    o, _, _ = _oracle(["not json at all"])
    c = semantic(o, [_hop1()], _hop2())
    assert c.passed is False and "parse_error" in c.reason and c.raw == ["not json at all"]


def _docs(n: int) -> list[tuple[str, str, str]]:
    return [(f"d{i}", f"Title {i}", f"text {i}") for i in range(n)]


def test_irreducibility_one_call_per_removed_document_and_fails_if_any_subset_answers() -> None:
    def answer_unless_missing(doc: str) -> Any:
        def reply(messages: list[Message], **_: Any) -> str:
            return _ans("unknown" if f"] {doc}\n" not in (messages[-1].content or "") else "Amsterdam")
        return reply

    # answerable whenever "Title 2" is present: removing d0 or d1 still answers -> fails, 3 calls
    o, llm, _ = _oracle([answer_unless_missing("Title 2")] * 3)
    c = irreducibility(o, "Where?", _docs(3), ["Amsterdam"])
    assert llm.calls == 3 and c.passed is False
    assert "d0" in c.reason and "d1" in c.reason and "d2" not in c.reason
    missing = []  # each call saw exactly the other documents (the calls run at once: any order)
    for req in llm.requests:
        text = req["messages"][-1].content or ""
        assert text.count("] Title") == 2
        missing += [i for i in range(3) if f"] Title {i}\n" not in text]
    assert sorted(missing) == [0, 1, 2]
    o, llm, _ = _oracle([_ans("unknown")] * 4)
    c = irreducibility(o, "Where?", _docs(4), ["Amsterdam"])
    assert llm.calls == 4 and c.passed is True


def test_irreducibility_asks_its_answers_at_once_and_an_outage_still_propagates() -> None:
    import threading

    import pytest

    from agentrag.errors import LLMError

    together = threading.Barrier(3, timeout=10)  # passes only if the 3 answers are in flight together

    def wait_for_the_others(messages: list[Message], **_: Any) -> str:
        together.wait()
        return _ans("unknown")

    o, llm, _ = _oracle([wait_for_the_others] * 3)
    c = irreducibility(o, "Where?", _docs(3), ["Amsterdam"])
    assert c.passed is True and llm.calls == 3 and o.calls == 3 and not together.broken
    assert list(c.details["removed"]) == ["d0", "d1", "d2"]  # reported in document order
    o, llm, _ = _oracle([_ans("unknown"), LLMError("down", is_retryable=True), _ans("unknown")])
    with pytest.raises(LLMError, match="down"):  # an outage is the item's outage, as before
        irreducibility(o, "Where?", _docs(3), ["Amsterdam"])


def test_necessity_and_solvability() -> None:
    audit_ok = json.dumps({"reason": "ok", "valid": True})
    # closed-book right -> necessity fails (solvability ran first and passed)
    o, llm, _ = _oracle([audit_ok, _ans("Arminianism"), _ans("Arminianism")])
    hop = verify(o, [_hop1()], _hop2())
    names = {c.name: c.passed for c in hop.checks}
    assert not hop.verified and hop.reason == "necessity: answered correctly without documents"
    assert names["solvability"] is True and names["necessity"] is False and names["irreducibility"] is None
    assert llm.calls == 3
    # with all documents wrong -> solvability fails, later stages not run
    o, llm, _ = _oracle([audit_ok, _ans("unknown")])
    hop = verify(o, [_hop1()], _hop2())
    assert hop.reason == "solvability: not answered correctly with all supporting documents"
    assert [c.passed for c in hop.checks if c.name in ("necessity", "irreducibility")] == [None, None]
    # everything passes: structural, audit, all docs, closed-book, one call per removed doc (2)
    o, llm, _ = _oracle([audit_ok, _ans("Arminianism"), _ans("unknown"), _ans("unknown"), _ans("unknown")])
    hop = verify(o, [_hop1()], _hop2())
    assert hop.verified and llm.calls == 5 and all(c.passed for c in hop.checks)


def test_structural_keeps_a_yes_no_comparison_of_equal_values() -> None:
    q1 = "What is the nationality of the composer Ada Varn?"
    h1 = Hop(level=1, template="atomic", atomic_question=q1, atomic_answer="American", doc_id="d1",
             doc_title="Ada Varn", question=q1, answer="American", verified=True)
    same = Hop(level=2, template="comparison", atomic_question="What is the nationality of the composer Ott Brem?",
               atomic_answer="American", doc_id="d2", doc_title="Ott Brem",
               question="Are the composers Ada Varn and Ott Brem of the same nationality?", answer="yes")
    assert structural([h1], same).passed  # equal values are the point of the comparison, not a repeat
