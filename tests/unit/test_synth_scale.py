"""Synthesis at scale (issue 27, part 3): a no-op rerun rewrites no file whose content did not
change and reads no record for its report; the statistics do work linear in the records; the
resume index reads ids without validating records. Each test fails on the old behaviour."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_ragshaper_pipeline import _cfg, _components
from test_ragshaper_support import ShaperRun
from test_reasonrag_pipeline import QUESTION, config, policy, retriever
from tracer_support import run_config, run_world

from agentrag.records import QAItem
from agentrag.runs import JsonlStore, RunDir, replace_if_changed
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.testing import ScriptedLLM

#: what a rerun rewrites by design: they describe the invocation (its wall time, its LLM calls)
INVOCATION = {"metrics.json", "report.md", "report.html", ".derived.json", ".agentrag.lock"}


def snapshot(run: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(run)): (p.stat().st_mtime_ns, hashlib.sha1(p.read_bytes()).hexdigest())
            for p in sorted(run.rglob("*")) if p.is_file() and p.name not in INVOCATION}


def changed(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def test_replace_if_changed_keeps_an_identical_file_and_replaces_a_different_one(tmp_path: Path) -> None:
    target, tmp = tmp_path / "a.jsonl", tmp_path / "a.jsonl.tmp"
    target.write_text("x\n")
    old = target.stat().st_mtime_ns
    time.sleep(0.01)
    tmp.write_text("x\n")
    assert replace_if_changed(tmp, target) is False and not tmp.exists() and target.stat().st_mtime_ns == old
    tmp.write_text("y\n")
    assert replace_if_changed(tmp, target) is True and target.read_text() == "y\n"


def test_ragshaper_noop_rerun_rewrites_no_export(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = ShaperRun(RunDir(out), _cfg(), _components()).run(["Ada Varn", "Ott Brem"])
    assert (out / "sft" / "trl_sft.jsonl").exists() and first["export"]["exported"] > 0
    before = snapshot(out)
    time.sleep(0.02)
    again = ShaperRun(RunDir(out), _cfg(), _components()).run(["Ada Varn", "Ott Brem"])
    assert changed(before, snapshot(out)) == []  # sft/, config.yaml, stage files untouched
    assert again["funnel"] == first["funnel"] and again["distractors"] == first["distractors"]


def test_tracer_noop_rerun_reads_no_record_for_the_report(tmp_path: Path, monkeypatch) -> None:
    import agentrag.synth.tracer.pipeline as pipeline

    cfg = run_config(tmp_path)
    first = run_world(tmp_path, cfg)
    calls = {"counts": 0, "export": 0}
    counts, export = pipeline.tracer_counts, pipeline.export_benchmark

    def counting(name: str, fn: Any) -> Any:
        def wrapped(*a: Any, **kw: Any) -> Any:
            calls[name] += 1
            return fn(*a, **kw)
        return wrapped

    monkeypatch.setattr(pipeline, "tracer_counts", counting("counts", counts))
    monkeypatch.setattr(pipeline, "export_benchmark", counting("export", export))
    before = snapshot(tmp_path)
    time.sleep(0.02)
    again = run_world(tmp_path, cfg)
    assert calls == {"counts": 0, "export": 0}
    assert changed(before, snapshot(tmp_path)) == []  # chains.jsonl and benchmark*.jsonl untouched
    assert again["funnel"] == first["funnel"] and again["per_hop_by_type"] == first["per_hop_by_type"]
    # a deleted export is a changed run: the rerun computes and writes it again
    (tmp_path / "benchmark_4hop.jsonl").unlink()
    run_world(tmp_path, cfg)
    assert calls == {"counts": 1, "export": 1} and (tmp_path / "benchmark_4hop.jsonl").exists()


def test_reasonrag_noop_rerun_keeps_dpo_and_a_subset_is_recounted(tmp_path: Path) -> None:
    other = QAItem(id="q2", question="Who directed Film Alpha (again)?", golden_answers=["John Smith"])
    both = [QUESTION, other]
    first = run_reasonrag(config(), tmp_path, llm=ScriptedLLM(default=policy), retriever=retriever(), questions=both)
    assert first["pairs"] > 0 and (tmp_path / "dpo" / "trl_dpo.jsonl").exists()
    before = snapshot(tmp_path)
    time.sleep(0.02)
    again = run_reasonrag(config(), tmp_path, llm=ScriptedLLM(default=policy), retriever=retriever(), questions=both)
    assert changed(before, snapshot(tmp_path)) == [] and again["pairs"] == first["pairs"]
    # the same files, fewer questions asked for: the statistics are those of the subset
    one = run_reasonrag(config(), tmp_path, llm=ScriptedLLM(default=policy), retriever=retriever(),
                        questions=[QUESTION])
    assert one["questions"] == 1 and first["questions"] == 2


class CountingList(list):  # type: ignore[type-arg]
    """A list that counts how often it is iterated."""

    iterations = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        CountingList.iterations += 1
        return super().__iter__()


@pytest.mark.parametrize("n", [20, 200])
def test_ragshaper_statistics_scan_the_distractors_a_fixed_number_of_times(n: int) -> None:
    """The distractor quota counted documents per tree by scanning every distractor once per tree."""
    from agentrag.records import Provenance
    from agentrag.synth.ragshaper import analysis
    from agentrag.synth.ragshaper.config import RagShaperConfig
    from agentrag.synth.ragshaper.schema import DistractorDoc, InfoTree

    trees = [InfoTree(id=f"t{i}", seed=f"s{i}", distractor_calls=3) for i in range(n)]
    # every other tree gets the 5 documents of the quota, the others 4
    docs = CountingList(DistractorDoc(id=f"d{i}-{j}", seed_id=f"t{i}", node_id="n", title="t", text="x",
                                      original_fact="f", distractor_type="doppelganger",
                                      provenance=Provenance(stage="explore"))
                        for i in range(n) for j in range(5 - i % 2))
    recs = analysis.RunRecords(seeds=n, trees=trees, distractors=docs, paths=[], qas=[], trajs=[], filters=[])
    CountingList.iterations = 0
    out = analysis.details(recs, RagShaperConfig(), {})
    assert CountingList.iterations <= 3
    assert out["seeds_meeting_distractor_quota"] == n // 2


def test_resume_index_reads_ids_without_validating_and_still_names_a_bad_line(tmp_path: Path, monkeypatch) -> None:
    from pydantic import BaseModel

    import agentrag.runs as runs

    class Rec(BaseModel):
        id: str
        text: str = ""

    path = tmp_path / "x.jsonl"
    store = JsonlStore(path, Rec)
    for k in ('a', 'b "quoted"', "c\\d"):
        store.append(Rec(id=k, text="t"))
    with path.open("a") as fh:
        fh.write(json.dumps({"text": "id not first", "id": "e"}) + "\n")
    parsed: list[int] = []
    monkeypatch.setattr(runs, "parse_record", lambda *a, **kw: parsed.append(1))
    again = JsonlStore(path, Rec)
    assert again.ids == {"a", 'b "quoted"', "c\\d", "e"} and parsed == []
    path.write_text('{"id":"a","text":"t"}\n{"id": "b", oops\n{"id":"c","text":"t"}\n')
    with pytest.raises(Exception, match="x.jsonl:2"):
        JsonlStore(path, Rec)


def test_evipath_statistics_stream_the_records(tmp_path: Path) -> None:
    """The statistics hold no record: each is collectable once the next is read (they built lists
    of every record of the run), and the counts are those of the records."""
    import gc
    import weakref

    from agentrag.records import Provenance, Usage
    from agentrag.synth.evipath.report import statistics
    from agentrag.synth.evipath.schema import EviItem, IterationRecord, PlanRecord

    n = 200
    alive = {"now": 0, "max": 0}

    def gone() -> None:
        alive["now"] -= 1

    def stream(make: Any) -> Any:
        for i in range(n):
            rec = make(i)
            alive["now"] += 1
            alive["max"] = max(alive["max"], alive["now"])
            weakref.finalize(rec, gone)
            yield rec
            del rec
            gc.collect(0)

    items = [EviItem(id=f"i{i}", question="q", answer="a") for i in range(n)]
    prov = Provenance(stage="plans", model="m", usage=Usage(calls=2, prompt_tokens=10))
    plans = stream(lambda i: PlanRecord(id=f"i{i}", status="ok" if i % 4 else "failed", reason="parse_error: x",
                                        provenance=prov))
    iters = stream(lambda i: IterationRecord(id=f"i{i}-it0", item_id=f"i{i}", n=0, last=True, actions=[],
                                             provenance=prov))
    counts, details = statistics(mode="abductive", split="both", items=items, plans=plans, iterations=iters,
                                 subs=[], sels=[], gates=[], convs=[], exported={}, export_roles=("planner",))
    assert alive["max"] <= 3
    # paths read the plans kept (an item is counted once, at the stage that rejected it)
    assert counts["plans"] == (n, n - n // 4, {"parse_error": n // 4}) and counts["paths"][0] == n - n // 4
    assert details["llm_per_item"]["calls"] == 4 and details["items_finished"] == n
