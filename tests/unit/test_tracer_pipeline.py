"""Tracer builder end to end on a scripted world: chains to 4 hops, exports, eval round trip, audit."""

from __future__ import annotations

import json
from pathlib import Path

from tracer_support import Q1, Q2, Q3, Q4, run_config, run_world, world_llm

from agentrag.errors import LLMError
from agentrag.eval.datasets import load_dataset
from agentrag.eval.hops import diagnose, lower_hop_items
from agentrag.eval.result import EvalResult
from agentrag.synth.tracer import audit_exports
from agentrag.synth.tracer.sampling import excluded_titles
from agentrag.synth.tracer.schema import DocRecord, HopRecord
from agentrag.testing import ScriptedLLM


def test_builds_four_hop_chain_and_exports_flashrag(tmp_path: Path) -> None:
    m = run_world(tmp_path)
    items = {i.id: i for i in load_dataset(tmp_path / "benchmark.jsonl")}
    chain = "d" + __import__("hashlib").sha1(b"p-amherst").hexdigest()[:10] + "-q0"
    assert set(items) == {f"{chain}-2hop", f"{chain}-3hop", f"{chain}-4hop"}
    four = items[f"{chain}-4hop"]
    assert four.hops == 4 and four.question == Q4 and four.golden_answers == ["Amsterdam"]
    assert four.metadata["type"] == "inference"
    assert four.metadata["supporting_doc_ids"] == ["p-amherst", "p-wesley", "p-armin", "p-jacobus"]
    lower = lower_hop_items(four)
    assert [(q.hops, q.question, q.golden_answers[0]) for q in lower] == [
        (1, Q1, "Wesleyan church"), (2, Q2, "Arminianism"), (3, Q3, "Jacobus Arminius")]
    assert lower[0].golden_answers == ["Wesleyan church", "Methodist church"]  # aliases kept
    for h in (2, 3, 4):
        rows = (tmp_path / f"benchmark_{h}hop.jsonl").read_text().splitlines()
        assert [json.loads(r)["metadata"]["hops"] for r in rows] == [h]
    # the numeric-only second pair was filtered with its reason; the excluded title never sampled
    atomic = [json.loads(x) for x in (tmp_path / "atomic.jsonl").read_text().splitlines()]
    reasons = [p["reason"] for r in atomic for p in r["pairs"] if p["status"] == "rejected"]
    assert reasons == ["numeric_answer: the answer is only numbers"]
    docs = [json.loads(x)["title"] for x in (tmp_path / "docs.jsonl").read_text().splitlines()]
    assert "Excluded Title" not in docs and len(docs) == 4
    assert m["per_hop_by_type"] == {"2hop": {"inference": 1}, "3hop": {"inference": 1}, "4hop": {"inference": 1}}
    assert m["calls_by_level"]["4"]["verified"] == 1
    assert audit_exports(tmp_path) == []
    assert (tmp_path / "report.html").is_file()


def test_maxd_on_the_export(tmp_path: Path) -> None:
    run_world(tmp_path)
    items = load_dataset(tmp_path / "benchmark_4hop.jsonl")
    (four,) = items
    probes = lower_hop_items(four)
    # the 4-hop question is wrong; levels 1 and 2 right, level 3 wrong -> depth 2
    results = [EvalResult(id=four.id, question=four.question, golden_answers=four.golden_answers, prediction="x",
                          correct=False, em=0, f1=0, steps=2, hops=4)]
    for p, ok in zip(probes, (True, True, False), strict=True):
        results.append(EvalResult(id=p.id, question=p.question, golden_answers=p.golden_answers, prediction="y",
                                  correct=ok, em=float(ok), f1=float(ok), steps=1, hops=p.hops,
                                  parent_id=four.id, level=p.hops))
    d = diagnose(results)
    assert d["by_hops"]["4"]["maxd"] == 2.0 and d["maxd"] == 2.0


def test_audit_catches_an_item_whose_hop_failed_a_gate(tmp_path: Path) -> None:
    run_world(tmp_path)
    path = tmp_path / "hop3.jsonl"
    rec = HopRecord.model_validate_json(path.read_text().splitlines()[0])
    assert rec.hop is not None
    rec.hop.checks[-1].passed = False
    path.write_text(rec.model_dump_json() + "\n")
    problems = audit_exports(tmp_path)
    assert any("3hop" in p and "irreducibility" in p for p in problems)
    assert any("4hop" in p for p in problems)


def test_excluded_titles_from_a_raw_benchmark_file(tmp_path: Path) -> None:
    bench = tmp_path / "hotpot.jsonl"
    bench.write_text(json.dumps({"_id": "x", "question": "q", "answer": "a", "supporting_facts": [],
                                 "context": [["Excluded Title", ["s."]], ["Wesleyanism", ["t."]]]}) + "\n")
    titles = excluded_titles([bench])
    assert titles == {"excluded title", "wesleyanism"}
    out = tmp_path / "run"
    cfg = run_config(out)
    cfg.exclude = [str(bench)]
    run_world(out, cfg)
    # Wesleyanism is excluded from sampling and from retrieval: no 2-hop chain can be built
    assert not (out / "benchmark.jsonl").read_text().strip()
    hop2 = [HopRecord.model_validate_json(x) for x in (out / "hop2.jsonl").read_text().splitlines()]
    assert hop2 and all(a.doc_title != "Wesleyanism" for r in hop2 for a in r.attempts)


def test_parse_failure_flags_the_step_and_keeps_the_shorter_chain(tmp_path: Path) -> None:
    inner = world_llm()

    def broken(messages, **kw):  # type: ignore[no-untyped-def]
        if "New passage title: Jacobus Arminius" in (messages[-1].content or ""):
            return "{not json"
        return inner.default(messages, **kw)  # type: ignore[misc,operator]

    run_world(tmp_path, llm=ScriptedLLM(default=broken))
    items = [json.loads(x) for x in (tmp_path / "benchmark.jsonl").read_text().splitlines()]
    assert sorted(i["metadata"]["hops"] for i in items) == [2, 3]
    rec = HopRecord.model_validate_json((tmp_path / "hop4.jsonl").read_text().splitlines()[0])
    assert rec.status == "failed" and "link: parse_error" in (rec.reason or "")
    assert rec.attempts[0].checks[0].raw == ["{not json"]


def test_outage_leaves_the_chain_unfinished_and_rerun_completes(tmp_path: Path) -> None:
    inner = world_llm()
    down = {"on": True}

    def flaky(messages, **kw):  # type: ignore[no-untyped-def]
        if down["on"] and "Second question:" in (messages[-1].content or ""):
            raise LLMError("503", is_retryable=True)
        return inner.default(messages, **kw)  # type: ignore[misc,operator]

    m = run_world(tmp_path, llm=ScriptedLLM(default=flaky))
    assert (tmp_path / "hop2.jsonl").read_text() == ""  # unfinished, not written as a failure
    assert m["unfinished"] == 1 and m["unfinished_by_stage"] == {"hop2": 1}
    assert [r["unfinished"] for r in m["funnel"] if r["stage"] == "hop2"] == [1]
    down["on"] = False
    m = run_world(tmp_path, llm=ScriptedLLM(default=flaky))
    assert m["unfinished"] == 0
    assert len((tmp_path / "benchmark.jsonl").read_text().splitlines()) == 3


def test_max_per_type_balances_domains(tmp_path: Path) -> None:
    cfg = run_config(tmp_path / "run")
    cfg.docs = 3
    cfg.max_hops = 2
    cfg.sampling.max_per_type = 1
    m = run_world(tmp_path / "run", cfg)
    assert m["domain_mix_docs"] == {"history": 1, "religion": 1}  # only two domains exist: 1 each
    assert [(r["in"], r["out"]) for r in m["funnel"] if r["stage"] == "select"] == [(4, 2)]
    docs = {d.id: d.domain for d in map(DocRecord.model_validate_json,
                                        (tmp_path / "run" / "docs.jsonl").read_text().splitlines())}
    atomic = [json.loads(x)["doc_id"] for x in (tmp_path / "run" / "atomic.jsonl").read_text().splitlines()]
    assert sorted(docs[d] for d in atomic) == ["history", "religion"]


def test_bad_exclude_files_name_file_line_field(tmp_path: Path) -> None:
    import pytest

    from agentrag.errors import UserError

    with pytest.raises(UserError, match="not found"):
        excluded_titles([tmp_path / "missing.jsonl"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"title": "ok"}) + "\n" + json.dumps({"context": [["t", []], 5]}) + "\n")
    with pytest.raises(UserError, match=r"bad\.jsonl:2: field 'context\[1\]'"):
        excluded_titles([bad])
    plain = tmp_path / "titles.txt"
    plain.write_text("Amherst,  Victoria\n\nWesleyanism\n")
    assert excluded_titles([plain]) == {"amherst, victoria", "wesleyanism"}


def test_every_call_sends_a_bounded_schema_and_invalid_replies_are_flagged(tmp_path: Path) -> None:
    from tracer_support import judge_llm, world_reply

    def strings(node: object) -> list[dict[str, object]]:
        if isinstance(node, dict):
            own = [node] if node.get("type") == "string" and "enum" not in node else []
            return own + [s for v in node.values() for s in strings(v)]
        return [s for v in node for s in strings(v)] if isinstance(node, list) else []

    llm, judge = world_llm(), judge_llm(score=1)
    run_world(tmp_path / "ok", llm=llm, judge=judge)
    for req in [*llm.requests, *judge.requests]:
        schema = req["response_format"]["json_schema"]["schema"]
        assert strings(schema) and all("maxLength" in s for s in strings(schema)), schema

    def too_long(messages, **kw):  # type: ignore[no-untyped-def]
        out = world_reply(messages, **kw)
        return out.replace('"place"', '"' + "x" * 200 + '"')  # an entity type over its bound

    run_world(tmp_path / "bad", llm=ScriptedLLM(default=too_long))
    docs = [DocRecord.model_validate_json(x) for x in (tmp_path / "bad" / "docs.jsonl").read_text().splitlines()]
    assert docs and all(d.status == "failed" and "parse_error" in (d.reason or "") and "entity_type" in (d.reason or "")
                        for d in docs)
    assert all(d.provenance.raw_output and "xxx" in d.provenance.raw_output for d in docs)


def test_export_drops_every_level_at_or_above_an_unverified_or_empty_hop(tmp_path: Path) -> None:
    from agentrag.records import read_jsonl
    from agentrag.synth.tracer.export import export_benchmark
    from agentrag.synth.tracer.schema import Chain

    run_world(tmp_path / "run")
    (chain,) = [c for c in read_jsonl(tmp_path / "run" / "chains.jsonl", Chain) if c.depth == 4]
    unverified = chain.model_copy(deep=True)
    unverified.hops[2].verified = False  # hop 3 failed a gate: the 3- and 4-hop items must not be written
    empty = chain.model_copy(deep=True)
    empty.hops[3].answer, empty.hops[3].aliases = "unknown", []  # a no-answer top hop
    for c, want in [(chain, [2, 3, 4]), (unverified, [2]), (empty, [2, 3])]:
        out = tmp_path / f"x{len(want)}"
        out.mkdir()
        got = export_benchmark([c], out)
        assert got["items"] == len(want)
        levels = [json.loads(x)["metadata"]["hops"] for x in (out / "benchmark.jsonl").read_text().splitlines()]
        assert levels == want
