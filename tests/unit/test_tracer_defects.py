"""Issue 23: each defect, driven through the real pipeline (``run_tracer`` on the scripted world)
with a scripted model that provokes it, with the outcome the fix gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tracer_support import (
    A2Q,
    A3Q,
    A4Q,
    PASSAGES,
    Q1,
    Q2,
    Q3,
    field,
    judge_llm,
    patched_llm,
    run_world,
    titles_in,
)

from agentrag.records import Passage
from agentrag.synth.tracer import audit_exports
from agentrag.synth.tracer.config import TracerConfig
from agentrag.synth.tracer.oracle import Oracle
from agentrag.synth.tracer.prompts import (
    ANSWER_DOCS_SYSTEM,
    ATOMIC_SYSTEM,
    AUDIT_SYSTEM,
    COMPOSE_SYSTEM,
    LINK_SYSTEM,
)
from agentrag.synth.tracer.schema import AtomicRecord, HopRecord
from agentrag.testing import FakeRetriever, ScriptedLLM

ALL3 = {"Amherst, Victoria", "Wesleyanism", "Arminianism"}


def _records(run: Path, stage: str, cls: Any) -> list[Any]:
    return [cls.model_validate_json(x) for x in (run / f"{stage}.jsonl").read_text().splitlines() if x.strip()]


def _hop_levels(run: Path) -> list[int]:
    return sorted(json.loads(x)["metadata"]["hops"] for x in (run / "benchmark.jsonl").read_text().splitlines())


def _failed(run: Path, level: int) -> HopRecord:
    (rec,) = _records(run, f"hop{level}", HopRecord)
    assert rec.status == "failed"
    return rec


# --- 1. an empty answer is never exported ----------------------------------------------------------
def test_empty_composed_answer_is_rejected_and_nothing_is_built_on_it(tmp_path: Path) -> None:
    def empty(system: str, user: str, **_: Any) -> str | None:
        if system == COMPOSE_SYSTEM and field(user, "Second question") == A3Q:
            return json.dumps({"question": Q3, "answer": ""})
        if system == ANSWER_DOCS_SYSTEM and field(user, "Question") == Q3:
            return json.dumps({"answer": "" if ALL3 <= titles_in(user) else "unknown"})
        return None

    run_world(tmp_path, llm=patched_llm(empty))
    assert _hop_levels(tmp_path) == [2]  # no 3-hop item with golden_answers [""], no hop 4 built on it
    assert "structural: empty_answer" in (_failed(tmp_path, 3).reason or "")
    assert not (tmp_path / "hop4.jsonl").read_text().strip()
    assert audit_exports(tmp_path) == []


def test_no_answer_atomic_pair_is_rejected(tmp_path: Path) -> None:
    def unknown(system: str, user: str, **_: Any) -> str | None:
        if system == ATOMIC_SYSTEM and "Amherst" in user:
            return json.dumps({"pairs": [{"question": Q1, "answer": "unknown"}]})
        return None

    run_world(tmp_path, llm=patched_llm(unknown))
    pairs = [p for r in _records(tmp_path, "atomic", AtomicRecord) for p in r.pairs]
    assert [p.reason for p in pairs] == ["empty_answer: 'unknown' is no answer"]
    assert not (tmp_path / "benchmark.jsonl").read_text().strip()


def test_grading_never_matches_an_empty_gold() -> None:
    judge = ScriptedLLM([])
    o = Oracle(ScriptedLLM([]), judge, TracerConfig())
    for pred, golds in [("", [""]), ("unknown", ["unknown"]), ("x", ["", " "]), ("", ["none"])]:
        assert o.grade("q", pred, golds).correct is False
    assert judge.calls == 0
    assert o.grade("q", "Amsterdam", ["", "Amsterdam"]).correct is True  # a real gold beside an empty one


def test_audit_rechecks_every_level_including_the_atomic_one(tmp_path: Path) -> None:
    run_world(tmp_path)
    assert audit_exports(tmp_path) == []
    path = tmp_path / "atomic.jsonl"
    recs = _records(tmp_path, "atomic", AtomicRecord)
    seed = next(r for r in recs if r.pairs and r.pairs[0].status == "accepted")
    seed.pairs[0].checks[-1].passed = False  # the seed's grounding check failed
    path.write_text("".join(r.model_dump_json() + "\n" for r in recs))
    problems = audit_exports(tmp_path)
    assert len([p for p in problems if "hop 1 failed ['grounded']" in p]) == 3 + 3  # 3 items, 2 files each
    bench = tmp_path / "benchmark_2hop.jsonl"
    item = json.loads(bench.read_text())
    bench.write_text(json.dumps({**item, "golden_answers": [""]}) + "\n")
    assert any("benchmark_2hop.jsonl" in p and "empty or no answer" in p for p in audit_exports(tmp_path))


# --- 5. the grading shortcut is exact match only ---------------------------------------------------
def test_near_miss_with_high_f1_goes_to_the_judge(tmp_path: Path) -> None:
    judge = ScriptedLLM(default=json.dumps({"reason": "another city", "score": 0}))
    g = Oracle(ScriptedLLM([]), judge, TracerConfig()).grade(
        "Which church?", "First Baptist Church of Houston", ["First Baptist Church of Dallas"])
    assert g.f1 == pytest.approx(0.8) and g.correct is False and judge.calls == 1

    def near(system: str, user: str, **_: Any) -> str | None:  # F1 0.8 against "Wesleyan church"
        if system == ANSWER_DOCS_SYSTEM and field(user, "Question") == Q1:
            return json.dumps({"answer": "Wesleyan church hall"})
        return None

    jd = judge_llm(score=0)
    run_world(tmp_path, llm=patched_llm(near), judge=jd)
    pairs = [p for r in _records(tmp_path, "atomic", AtomicRecord) for p in r.pairs if p.question == Q1]
    assert pairs[0].reason == "not_grounded: not answered correctly with the document"
    assert pairs[0].checks[-1].f1 == pytest.approx(0.8) and pairs[0].checks[-1].judge_score == 0 and jd.calls >= 1


# --- 3. an inference hop answers with the new atomic answer ----------------------------------------
def test_inference_hop_with_another_answer_is_rejected(tmp_path: Path) -> None:
    def wrong(system: str, user: str, **_: Any) -> str | None:
        if system == COMPOSE_SYSTEM and field(user, "Second question") == A2Q:
            return json.dumps({"question": Q2, "answer": "Protestantism"})
        if system == ANSWER_DOCS_SYSTEM and field(user, "Question") == Q2:
            return json.dumps({"answer": "Protestantism" if {"Amherst, Victoria", "Wesleyanism"} <= titles_in(user)
                               else "unknown"})
        return None

    run_world(tmp_path, llm=patched_llm(wrong))
    reason = _failed(tmp_path, 2).reason or ""
    assert "structural: inference_answer" in reason and "'Arminianism'" in reason
    assert not (tmp_path / "benchmark.jsonl").read_text().strip()


# --- 4. leakage: aliases and partial names ---------------------------------------------------------
@pytest.mark.parametrize(("level", "question", "leak"), [
    (2, "Which theological perspective is associated with the Methodist church established in Amherst, "
        "Victoria by 1857?", "'Methodist church'"),  # hop 1's alias
    (4, "In which city did Arminius, whose ideas underlie the theological perspective associated with the type "
        "of church established in Amherst, Victoria by 1857, teach sermons on the Epistle to the Romans?",
     "'arminius' (part of 'Jacobus Arminius')"),  # a partial name of hop 3's answer
])
def test_alias_or_partial_name_of_an_earlier_answer_is_leakage(tmp_path: Path, level: int, question: str,
                                                               leak: str) -> None:
    atomic = {2: A2Q, 4: A4Q}[level]
    answer = {2: "Arminianism", 4: "Amsterdam"}[level]

    def leaky(system: str, user: str, **_: Any) -> str | None:
        if system == COMPOSE_SYSTEM and field(user, "Second question") == atomic:
            return json.dumps({"question": question, "answer": answer})
        if system == ANSWER_DOCS_SYSTEM and field(user, "Question") == question:  # answerable with all docs only
            return json.dumps({"answer": answer if len(titles_in(user)) == level else "unknown"})
        return None

    run_world(tmp_path, llm=patched_llm(leaky))
    reason = _failed(tmp_path, level).reason or ""
    assert reason.startswith("structural: leakage") and leak in reason
    assert max(_hop_levels(tmp_path), default=1) == level - 1


# --- 2. the logic check sees the documents ---------------------------------------------------------
def test_false_link_between_namesakes_is_caught_from_the_documents(tmp_path: Path) -> None:
    namesake = Passage(id="p-wesley", title="Wesleyanism",
                       text="Wesleyanism is a 2003 album by the rock band Wesley. Its closing song, associated with "
                            "Arminianism, was a single." + " Filler text." * 10)
    passages = [namesake if p.id == "p-wesley" else p for p in PASSAGES]

    def auditor(system: str, user: str, **_: Any) -> str | None:
        if system == AUDIT_SYSTEM and "2003 album by the rock band" in user:  # only the document shows it
            return json.dumps({"reason": "the Wesleyan church and the album Wesleyanism are namesakes",
                               "failure": "false_entity_link", "valid": False})
        return None

    m = run_world(tmp_path, llm=patched_llm(auditor), kb=FakeRetriever(passages), passages=passages)
    assert (_failed(tmp_path, 2).reason or "").startswith("semantic: false_entity_link: the Wesleyan church")
    hop2 = next(r for r in m["funnel"] if r["stage"] == "hop2.candidates")
    assert hop2["rejected"].get("semantic: false_entity_link") == 1


def test_trivial_concatenation_is_rejected(tmp_path: Path) -> None:
    probe = ("What type of church was established in Amherst, Victoria by 1857, and with which theological "
             "perspective is it associated?")

    def concat(system: str, user: str, **_: Any) -> str | None:
        if system == COMPOSE_SYSTEM and field(user, "Second question") == A2Q:
            return json.dumps({"question": probe, "answer": "Arminianism"})
        if system == ANSWER_DOCS_SYSTEM and field(user, "Question") == probe:
            return json.dumps({"answer": "Arminianism" if len(titles_in(user)) == 2 else "unknown"})
        return None

    run_world(tmp_path, llm=patched_llm(concat))
    assert (_failed(tmp_path, 2).reason or "").startswith("structural: trivial_concatenation")


# --- 6. the released heuristics ---------------------------------------------------------------------
@pytest.mark.parametrize(("pair", "reason"), [
    ({"question": Q1, "answer": "Wesleyan and Methodist church"}, "and_or_answer"),
    ({"question": "According to the passage, what type of church was established in Amherst?",
      "answer": "Wesleyan church"}, "document_reference"),
])
def test_atomic_heuristics(tmp_path: Path, pair: dict[str, str], reason: str) -> None:
    def bad(system: str, user: str, **_: Any) -> str | None:
        if system == ATOMIC_SYSTEM and "Amherst" in user:
            return json.dumps({"pairs": [pair]})
        return None

    run_world(tmp_path, llm=patched_llm(bad))
    (got,) = [p for r in _records(tmp_path, "atomic", AtomicRecord) for p in r.pairs]
    assert got.status == "rejected" and (got.reason or "").startswith(reason)


def test_dropped_year_and_repeated_answer_are_rejected(tmp_path: Path) -> None:
    no_year = "Which theological perspective is associated with the type of church established in Amherst, Victoria?"

    def bad(system: str, user: str, **_: Any) -> str | None:
        if system == COMPOSE_SYSTEM and field(user, "Second question") == A2Q:
            return json.dumps({"question": no_year, "answer": "Arminianism"})
        return None

    run_world(tmp_path / "year", llm=patched_llm(bad))
    assert (_failed(tmp_path / "year", 2).reason or "").startswith("structural: year_dropped: the year(s) 1857")

    back = "Which church holds the ideas of Arminianism?"

    def repeat(system: str, user: str, **_: Any) -> str | None:
        if system == LINK_SYSTEM and field(user, "New passage title") == "Arminianism":
            return json.dumps({"template": "inference", "question": back, "answer": "Wesleyan church"})
        if system == ANSWER_DOCS_SYSTEM and field(user, "Question") == back:
            return json.dumps({"answer": "Wesleyan church"})
        if system == COMPOSE_SYSTEM and field(user, "Second question") == back:
            return json.dumps({"answer": "Wesleyan church", "question": "Which church holds the ideas of the "
                               "theological perspective associated with the church of Amherst, Victoria by 1857?"})
        return None

    run_world(tmp_path / "repeat", llm=patched_llm(repeat))
    assert (_failed(tmp_path / "repeat", 3).reason or "").startswith("structural: repeated_answer")


def test_number_and_year_pages_are_neither_sampled_nor_retrieved(tmp_path: Path) -> None:
    year = Passage(id="p-1857", title="1857", text="1857 was the year a Wesleyan church was established in Amherst, "
                   "Victoria; Arminianism and Jacobus Arminius were discussed." + " More events." * 10)
    passages = [*PASSAGES, year]
    llm = patched_llm(lambda *a, **k: None)
    m = run_world(tmp_path, llm=llm, kb=FakeRetriever(passages), passages=passages)
    docs = [json.loads(x)["title"] for x in (tmp_path / "docs.jsonl").read_text().splitlines()]
    assert "1857" not in docs and m["sampling"]["number_title_pages"] == 1
    assert all("New passage title: 1857" not in (r["messages"][-1].content or "") for r in llm.requests)
    assert _hop_levels(tmp_path) == [2, 3, 4]


def test_paper_preset_beside_the_defaults() -> None:
    from agentrag.errors import UserError
    from agentrag.synth.tracer.config import TracerRunConfig, preset_base

    paper = TracerRunConfig.model_validate(preset_base("paper", {"docs": 3, "max_hops": None}))
    default = TracerRunConfig.model_validate(preset_base("default", {}))
    assert (paper.compose.retrieve_k, paper.atomic.pairs_per_doc, paper.compose.candidates_per_hop,
            paper.max_hops, paper.docs, paper.preset) == (10, 5, 15, 4, 3, "paper")
    assert (default.compose.retrieve_k, default.atomic.pairs_per_doc, default.compose.candidates_per_hop) == (5, 2, 2)
    with pytest.raises(UserError, match="unknown preset 'papr'"):
        preset_base("papr", {})


# --- 8. every sampled call is seeded from the run seed and the item --------------------------------
def _seeded_build(out: Path, seed: int, concurrency: int = 1) -> str:
    from tracer_support import run_config, seeded_world

    cfg = run_config(out)
    cfg.seed, cfg.concurrency = seed, concurrency
    llm = ScriptedLLM(default=seeded_world, model="world")
    run_world(out, cfg, llm=llm)
    sampled = [r for r in llm.requests if r.get("temperature")]
    assert sampled and all(isinstance(r.get("seed"), int) for r in sampled)
    assert len({r["seed"] for r in sampled}) == len(sampled)  # no two sampled calls share a seed
    pairs = sorted((p.id, p.question, p.answer, tuple(p.aliases), p.status)
                   for r in _records(out, "atomic", AtomicRecord) for p in r.pairs)
    return "\n".join(sorted((out / "benchmark.jsonl").read_text().splitlines()) + [repr(pairs)])


def test_runs_are_reproducible_and_the_seed_matters(tmp_path: Path) -> None:
    first = _seeded_build(tmp_path / "a", seed=0)
    assert "variant " in first
    assert _seeded_build(tmp_path / "b", seed=0, concurrency=2) == first  # same settings: same run
    assert _seeded_build(tmp_path / "c", seed=1) != first  # another run seed: other samples
