"""Reruns keep a synthesizer run's record: a no-op rerun of a finished run leaves ``metrics.json``
and the reports byte for byte as the run that did the work wrote them (its LLM calls and wall time,
not zeros), for every registered synthesizer; a rerun that runs the pipeline again reports the
usage of every invocation summed, and a resume after an outage adds what it paid to what the
partial run paid."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_reasonrag_faults import _fails_at
from test_synth_finished import OTHER, _evipath, _ragshaper, _tracer
from test_synth_finished import run as _reasonrag_run

from agentrag.errors import LLMError
from agentrag.synth import registry
from agentrag.synth.driver import FINISHED
from agentrag.testing import ScriptedLLM

RECORD = ("metrics.json", "report.md", "report.html")


def _reasonrag(out: Path, data: Path) -> Callable[[], dict[str, Any]]:
    return lambda: _reasonrag_run(out)


def _annotated(out: Path, data: Path) -> Callable[[], dict[str, Any]]:
    from test_annotated_teacher import MUSIQUE, TWOWIKI, _passages, _write

    from agentrag.synth.annotated import AnnotatedRunConfig, run_annotated
    from agentrag.testing import FakeRetriever

    src = out.parent / "src"
    src.mkdir(exist_ok=True)
    files = [_write(src, "mus_train.jsonl", [MUSIQUE]), _write(src, "wiki_train.jsonl", [TWOWIKI])]
    return lambda: run_annotated(AnnotatedRunConfig(datasets=files, top_k=2), out, retriever=FakeRetriever(_passages()))


#: one run of each registered synthesizer on scripted models (the annotated one calls no LLM)
MAKERS = {"ragshaper": _ragshaper, "reasonrag": _reasonrag, "evipath": _evipath, "tracer": _tracer,
          "annotated": _annotated}


def _snapshot(out: Path) -> dict[str, tuple[bytes, int]]:
    return {n: ((out / n).read_bytes(), (out / n).stat().st_mtime_ns) for n in RECORD}


def _calls(m: dict[str, Any]) -> dict[str, Any]:
    return {role: (st.get("hits"), st.get("misses"), st.get("inner_calls"), st.get("calls"))
            for role, st in m["llm"].items()}


def _paid(usage: dict[str, Any]) -> int:
    """Calls that reached a model (backend calls behind the run's cache, or an object's own count)."""
    return sum(st.get("inner_calls", st.get("calls")) or 0 for st in usage.values())


def test_every_registered_synthesizer_is_covered() -> None:
    assert set(MAKERS) == set(registry.SYNTHESIZERS)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_noop_rerun_leaves_the_record_byte_identical(tmp_path: Path, name: str, data_dir: Path) -> None:
    out = tmp_path / "run"
    go = MAKERS[name](out, data_dir)
    first = go()
    assert first["unfinished"] == 0 and first["invocations"] == 1
    if name != "annotated":  # the LLM calls the run paid are its record
        assert _paid(first["llm"]) > 0
    before = _snapshot(out)
    again = go()
    assert again == first == json.loads((out / "metrics.json").read_text())
    assert _snapshot(out) == before  # the same bytes, not even rewritten

    # a deleted report comes back from the kept record, the same bytes
    (out / "report.html").unlink()
    go()
    assert (out / "report.html").read_bytes() == before["report.html"][0]
    assert (out / "metrics.json").read_bytes() == before["metrics.json"][0]

    # a full resume with no work left (a touched stage file) adds nothing to the usage it reports
    stage = sorted(p for p in out.glob("*.jsonl") if p.stat().st_size)[0]
    st = stage.stat()
    os.utime(stage, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    third = go()
    assert third["invocations"] == 2 and _calls(third) == _calls(first)
    assert _paid(third["invocation_llm"]) == 0 and _paid(third["llm"]) == _paid(first["llm"])
    assert third["wall_s"] >= first["wall_s"]
    assert json.loads((out / FINISHED).read_text())["value"]["metrics"] == third
    assert go() == third  # and that record is kept in turn


def test_a_resume_after_an_outage_sums_the_usage_of_both_invocations(tmp_path: Path) -> None:
    partial = _reasonrag_run(tmp_path, llm=ScriptedLLM(default=_fails_at(8, LLMError("HTTP 503", is_retryable=True))),
                             concurrency=1)
    assert partial["unfinished"] == 1 and partial["invocations"] == 1
    (role,) = partial["llm"]
    paid = partial["llm"][role]
    assert _paid(partial["llm"]) > 0

    done = _reasonrag_run(tmp_path, concurrency=1)
    assert done["unfinished"] == 0 and done["invocations"] == 2
    now = done["invocation_llm"][role]
    assert _paid(done["invocation_llm"]) > 0  # the resume did work of its own
    total = done["llm"][role]
    assert set(total) == set(paid) | set(now)
    for k in total:
        assert total[k] == paid.get(k, 0) + now.get(k, 0), k
    assert abs(done["wall_s"] - (partial["wall_s"] + done["invocation_wall_s"])) <= 0.11
    report = (tmp_path / "report.md").read_text()
    assert "summed over the 2 invocations" in report

    # the no-op rerun after it keeps the summed record
    kept = (tmp_path / "metrics.json").read_bytes()
    assert _reasonrag_run(tmp_path, concurrency=1) == done and (tmp_path / "metrics.json").read_bytes() == kept


def test_more_items_add_to_the_record_of_the_earlier_ones(tmp_path: Path) -> None:
    one = _reasonrag_run(tmp_path, questions=[OTHER])
    both = _reasonrag_run(tmp_path)
    (role,) = one["llm"]
    assert both["invocations"] == 2
    assert _paid(both["llm"]) == _paid(one["llm"]) + _paid(both["invocation_llm"]) > _paid(one["llm"])


def test_usage_blocks_add_role_by_role() -> None:
    from agentrag.llm.usage import add_usage

    before = {"teacher": {"hits": 1, "misses": 3, "inner_calls": 3, "hit_rate": 0.25, "backend_latency_s": 1.25},
              "judge": {"calls": 4}}
    now = {"teacher": {"hits": 3, "misses": 1, "inner_calls": 1, "hit_rate": 0.75, "backend_latency_s": 0.5},
           "verifier": {"calls": 2}}
    got = add_usage(before, now)
    assert got == {"teacher": {"hits": 4, "misses": 4, "inner_calls": 4, "hit_rate": 0.5, "backend_latency_s": 1.75},
                   "judge": {"calls": 4}, "verifier": {"calls": 2}}
    assert add_usage({}, now) == now and add_usage(before, {}) == before
