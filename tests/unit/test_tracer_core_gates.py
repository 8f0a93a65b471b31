"""The Tracer's gates on the matching core (agentrag.match) and the verifier: no-answer golds and
aliases, leakage in any written form, an answer restating a bridge entity, entity names with
"and"/"&"/"/", and documents shown whole (or cut per hop around the fact), each both ways and
through the real pipeline where the run's files and metrics are what a user reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tracer_support import (
    A2Q,
    A3Q,
    PASSAGES,
    Q1,
    Q2,
    Q3,
    field,
    patched_llm,
    run_config,
    run_world,
    titles_in,
)

from agentrag.records import Passage
from agentrag.synth.tracer.atomic import filter_pair, malformed_reason
from agentrag.synth.tracer.config import TracerConfig
from agentrag.synth.tracer.oracle import Oracle, window
from agentrag.synth.tracer.prompts import (
    ANSWER_DOCS_SYSTEM,
    ATOMIC_SYSTEM,
    AUDIT_SYSTEM,
    COMPOSE_SYSTEM,
    LINK_SYSTEM,
)
from agentrag.synth.tracer.schema import AtomicPair, AtomicRecord, Hop, HopRecord
from agentrag.synth.tracer.verify import restated_bridge, structural
from agentrag.synth.verifier import VerifierUnanswered
from agentrag.testing import FakeRetriever, ScriptedLLM

DOC = ("Amherst, Victoria", "By 1857 a Wesleyan church had been established in the town.")


def _ans(a: str) -> str:
    return json.dumps({"answer": a})


def _verdict(holds: bool) -> str:
    return json.dumps({"holds": holds, "reason": "scripted"})


def _is_verifier(user: str) -> bool:
    return "Does the statement hold?" in user


def _hop1(answer: str = "Wesleyan church", aliases: list[str] | None = None) -> Hop:
    return Hop(level=1, template="atomic", atomic_question=Q1, atomic_answer=answer, atomic_aliases=aliases or [],
               doc_id="d1", doc_title=DOC[0], doc_text=DOC[1], question=Q1, answer=answer, aliases=aliases or [],
               verified=True)


def _hop2(question: str = Q2, answer: str = "Arminianism", atomic_q: str = A2Q, doc: str = "") -> Hop:
    return Hop(level=2, template="inference", atomic_question=atomic_q, atomic_answer=answer, doc_id="d2",
               doc_title="Wesleyanism", doc_text=doc or f"The Wesleyan church is associated with {answer}.",
               question=question, answer=answer)


# --- no-answer: one vocabulary for answers, aliases and golds --------------------------------------
@pytest.mark.parametrize("answer", ["NA", "null", "Not applicable", "No information", "not stated", "unanswerable",
                                    "N/A", "Unknown.", "cannot be determined", "I don't know"])
def test_a_no_answer_is_no_atomic_answer(answer: str) -> None:
    assert (malformed_reason(Q1, answer, 8) or "").startswith("empty_answer")


@pytest.mark.parametrize("answer", ["No Doubt", "Missing", "Unknown Pleasures", "Nobody"])
def test_titles_that_are_words_are_answers(answer: str) -> None:
    assert not (malformed_reason(Q1, answer, 8) or "").startswith("empty_answer")


def test_no_answer_aliases_are_removed_counted_and_never_exported(tmp_path: Path) -> None:
    """Aliases "unknown", "N/A", "Not applicable", "null" from the atomic, link and compose replies
    never become golds: an agent answering "unknown" cannot score; the report counts them."""
    def aliased(system: str, user: str, **_: Any) -> str | None:
        if system == ATOMIC_SYSTEM and "Amherst" in user:
            return json.dumps({"pairs": [{"question": Q1, "answer": "Wesleyan church",
                                          "aliases": ["Methodist church", "unknown", "N/A"]}]})
        if system == LINK_SYSTEM and field(user, "New passage title") == "Wesleyanism":
            return json.dumps({"template": "inference", "question": A2Q, "answer": "Arminianism",
                               "aliases": ["Not applicable"]})
        if system == COMPOSE_SYSTEM and field(user, "Second question") == A2Q:
            return json.dumps({"question": Q2, "answer": "Arminianism", "aliases": ["null", "Arminian theology"]})
        return None

    m = run_world(tmp_path, llm=patched_llm(aliased))
    rows = [json.loads(x) for x in (tmp_path / "benchmark.jsonl").read_text().splitlines()]
    assert rows, "the chain should still be built"
    golds = [g for r in rows for g in r["golden_answers"]] + [
        g for r in rows for lo in r["metadata"]["lower_hop_questions"] for g in lo["golden_answers"]]
    assert "Methodist church" in golds and "Arminian theology" in golds
    assert not {"unknown", "N/A", "Not applicable", "null"} & set(golds)
    assert m["no_answer_aliases_removed"] == 4
    assert m["export"]["no_answer"] == {"items_dropped": 0, "golds_removed": 0}


# --- leakage: any written form of a bridge, parts of the final answer -------------------------------
@pytest.mark.parametrize(("form", "shown"), [
    ("wesleyan church", "'Wesleyan church' (hop 1)"), ("Wesleyan-church", "'Wesleyan church' (hop 1)"),
    ("Wesleyan church's", "'Wesleyan church' (hop 1)"), ("WESLEYAN CHURCH", "'Wesleyan church' (hop 1)"),
    ("Wesleyan", "'wesleyan' (part of 'Wesleyan church') (hop 1)"),
])
def test_a_bridge_written_in_any_form_leaks(form: str, shown: str) -> None:
    q = f"Which theological perspective is associated with the {form} established in Amherst, Victoria by 1857?"
    c = structural([_hop1()], _hop2(q))
    assert not c.passed and c.reason.startswith("structural: leakage: the intermediate answer") and shown in c.reason


def test_a_part_of_the_final_answer_leaks_and_a_name_sharing_letters_does_not() -> None:
    h3 = Hop(level=3, template="inference", atomic_question=A3Q, atomic_answer="Jacobus Arminius", doc_id="d3",
             doc_title="Arminianism", doc_text="Arminianism is based on the ideas of Jacobus Arminius.",
             question=Q3.replace("Which Dutch theologian's", "Which Dutch theologian, Arminius's,"),
             answer="Jacobus Arminius")
    c = structural([_hop1(), _hop2()], h3)
    assert not c.passed and "leakage: the final answer 'arminius' (part of 'Jacobus Arminius')" in c.reason
    ok = h3.model_copy(update={"question": Q3})
    assert structural([_hop1(), _hop2()], ok).passed
    near = h3.model_copy(update={"question": Q3.replace("Dutch theologian's", "Dutch theologian (not Arminiusson)'s")})
    assert "final answer" not in structural([_hop1(), _hop2()], near).reason


# --- an answer that restates a bridge entity ---------------------------------------------------------
@pytest.mark.parametrize("again", ["the Wesleyan Church", "WESLEYAN CHURCH", "Wesleyan church's", "Methodist church"])
def test_an_answer_restating_the_bridge_in_another_form_is_rejected(again: str) -> None:
    q = "Which church does the theological perspective of the town of Amherst, Victoria by 1857 stem from?"
    c = structural([_hop1(aliases=["Methodist church"])],
                   _hop2(q, again, atomic_q="Which church is associated with the Wesleyan church?"))
    assert not c.passed and c.reason.startswith("structural: repeated_answer")


def test_a_name_containing_the_bridge_goes_to_the_verifier_both_ways() -> None:
    prev, docs = [_hop1("Jacobus Arminius")], ["Jacobus Arminius taught at Leiden."]
    cand = _hop2(answer="Arminius")
    assert restated_bridge(prev, cand, docs) is None  # lexical only: undecided, kept
    same = ScriptedLLM([_verdict(True)])  # "Arminius" names the same person
    assert (restated_bridge(prev, cand, docs, same) or "").startswith("verifier: bridge_restated: 'Arminius'")
    other = ScriptedLLM([_verdict(False)])  # "Arminius Prize" is another entity
    assert restated_bridge(prev, _hop2(answer="Arminius Prize"), docs, other) is None
    assert same.calls == other.calls == 1
    assert restated_bridge(prev, _hop2(answer="Arminianism"), docs, ScriptedLLM([])) is None  # no call needed


# --- entity names with "and", "&", "/" ---------------------------------------------------------------
def _oracle(script: list[Any]) -> tuple[Oracle, ScriptedLLM]:
    llm = ScriptedLLM(script)
    return Oracle(llm, ScriptedLLM([]), TracerConfig()), llm


@pytest.mark.parametrize("name", ["Simon & Garfunkel", "AC/DC", "Bosnia and Herzegovina", "Marks and Spencer"])
def test_a_name_with_and_that_the_document_writes_is_kept_by_the_verifier(name: str) -> None:
    doc = ("Amherst, Victoria", f"By 1857 the town hall hosted a concert by {name}, the first in Victoria.")
    q = "Who gave the first concert in the town hall of Amherst, Victoria?"
    o, llm = _oracle([_verdict(True), _ans("unknown"), _ans(name)])
    out = filter_pair(o, AtomicPair(id="p", question=q, answer=name), doc)
    assert out.status == "accepted" and llm.calls == 3 and o.calls == 3
    assert out.checks[0].details == {"verifier": ["one_answer"]}
    assert "Exactly one entity" in (llm.requests[0]["messages"][-1].content or "")


def test_two_things_joined_are_rejected_lexically_or_by_the_verifier() -> None:
    o, llm = _oracle([])
    out = filter_pair(o, AtomicPair(id="p", question=Q1, answer="Wesleyan and Methodist church"), DOC)
    assert (out.reason or "").startswith("and_or_answer") and llm.calls == 0  # no document writes it as one
    doc = ("Amherst, Victoria", "By 1857 Wesleyan and Anglican churches stood side by side in the town.")
    o, llm = _oracle([_verdict(False)])
    out = filter_pair(o, AtomicPair(id="p", question=Q1, answer="Wesleyan and Anglican"), doc)
    assert (out.reason or "").startswith("verifier: one_answer") and llm.calls == 1


def test_a_verifier_without_a_verdict_leaves_the_item_unfinished() -> None:
    doc = ("Amherst, Victoria", "By 1857 the town hall hosted a concert by Simon & Garfunkel.")
    o, _ = _oracle(["no json", "still none", "nothing"])
    with pytest.raises(VerifierUnanswered):
        filter_pair(o, AtomicPair(id="p", question="Who played in Amherst, Victoria in 1857?",
                                  answer="Simon & Garfunkel"), doc)


def test_the_report_counts_what_the_verifier_decided(tmp_path: Path) -> None:
    band = Passage(id="p-amherst", title="Amherst, Victoria",
                   text=PASSAGES[0].text + " In 1857 the town hall hosted a concert by Simon & Garfunkel.")
    passages = [band, *PASSAGES[1:]]
    q = "Which duo gave a concert in the town hall of Amherst, Victoria in 1857?"

    def band_pair(system: str, user: str, **_: Any) -> str | None:
        if system == ATOMIC_SYSTEM and "Amherst" in user:
            return json.dumps({"pairs": [{"question": Q1, "answer": "Wesleyan church"},
                                         {"question": q, "answer": "Simon & Garfunkel"}]})
        if _is_verifier(user):
            return _verdict(True)
        if system == ANSWER_DOCS_SYSTEM and field(user, "Question") == q:
            return _ans("Simon & Garfunkel")
        return None

    m = run_world(tmp_path, llm=patched_llm(band_pair), kb=FakeRetriever(passages), passages=passages)
    pairs = [p for r in (AtomicRecord.model_validate_json(x) for x in (tmp_path / "atomic.jsonl").read_text()
                         .splitlines()) for p in r.pairs]
    assert [p.status for p in pairs] == ["accepted", "accepted"]
    assert m["verifier_decisions"] == {"one_answer": {"kept": 1}}


# --- documents: whole, or a window per hop around the fact --------------------------------------------
def test_the_auditor_and_generator_see_a_contradiction_far_into_a_long_document(tmp_path: Path) -> None:
    tail = "CONTRADICTION: the Wesleyan church of Amherst was in fact never built."
    long = Passage(id="p-amherst", title="Amherst, Victoria",
                   text=PASSAGES[0].text + " Later history." * 200 + " " + tail)
    passages = [long, *PASSAGES[1:]]
    llm = patched_llm(lambda *a, **k: None)
    m = run_world(tmp_path, llm=llm, kb=FakeRetriever(passages), passages=passages)
    assert len(long.text) > 3000
    seen = {r["messages"][0].content: r["messages"][-1].content or "" for r in llm.requests
            if tail in (r["messages"][-1].content or "")}
    assert ATOMIC_SYSTEM in seen and AUDIT_SYSTEM in seen and ANSWER_DOCS_SYSTEM in seen
    assert m["doc_cuts"] == {"atomic": 0, "hop2": 0, "hop3": 0, "hop4": 0}


def test_with_a_cut_the_window_holds_each_hops_fact_and_cuts_are_counted(tmp_path: Path) -> None:
    fact = "By 1857 a Wesleyan church had been established in the town, next to the school."
    text = "Amherst is a locality in Victoria, Australia." + " Gold was found nearby." * 30 + " " + fact
    assert window(text, 300, ["Wesleyan church"]).endswith(fact) and len(window(text, 300, ["Wesleyan church"])) == 300
    assert window(text, 300, ["Australia"]) == text[:300]  # the fact already in the first 300 characters
    assert window("short", 300, ["x"]) == "short"
    long = Passage(id="p-amherst", title="Amherst, Victoria", text=text)
    passages = [long, *PASSAGES[1:]]
    cfg = run_config(tmp_path)
    cfg.atomic.max_doc_chars = 300
    llm = patched_llm(lambda *a, **k: None)
    m = run_world(tmp_path, cfg, llm=llm, kb=FakeRetriever(passages), passages=passages)
    audits = [r["messages"][-1].content or "" for r in llm.requests if r["messages"][0].content == AUDIT_SYSTEM]
    assert audits and all(fact in a for a in audits)  # hop 1's fact, although past the first 300 characters
    grounded = [r["messages"][-1].content or "" for r in llm.requests
                if r["messages"][0].content == ANSWER_DOCS_SYSTEM and field(r["messages"][-1].content or "",
                                                                           "Question") == Q1]
    assert grounded and fact in grounded[0] and titles_in(grounded[0]) == {"Amherst, Victoria"}
    assert m["doc_cuts"]["atomic"] == 2  # the generator's view and the grounding answer's
    assert m["doc_cuts"]["hop2"] == 2  # hop 1's document: the auditor's view and the answers' (shared)
    hop2 = [HopRecord.model_validate_json(x) for x in (tmp_path / "hop2.jsonl").read_text().splitlines()]
    assert hop2[0].cuts == m["doc_cuts"]["hop2"]


def test_a_valid_hop_asks_the_verifier_nothing() -> None:
    """Valid items without joined names or contained bridge names cost no verifier call, so they
    are checked (and exported) exactly as before."""
    assert structural([_hop1()], _hop2(), ScriptedLLM([])).details == {}


def test_the_gate_modules_keep_no_private_normalizer_or_matching_regex() -> None:
    """The Tracer's gate modules compare strings only through agentrag.match / agentrag.synth.gates:
    no import of eval's normalizer, no regex of their own (the one left in ``sampling`` reads a
    title's shape: a number or year page)."""
    import inspect

    from agentrag.synth.tracer import atomic, compose, export, oracle, outputs, sampling, verify

    for mod in (atomic, compose, export, oracle, outputs, verify):
        src = inspect.getsource(mod)
        assert "normalize_answer" not in src and "re.compile" not in src and "import re\n" not in src, mod.__name__
    src = inspect.getsource(sampling)
    assert "normalize_answer" not in src and src.count("re.compile") == 1 and "_NUMBER_TITLE = re.compile" in src
