"""RAGShaper's stages read their items' records from the stage files (issue 27, part 3: peak
memory): QA synthesis, elicitation and the tagger hold the records of the items in flight, not
every tree, question or trajectory of the run; :class:`StageIndex` reads what JsonlStore reads."""

from __future__ import annotations

import gc
import pickle
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_ragshaper_support import ShaperRun, curator_llm, main_retriever, teacher_llm

from agentrag.errors import UserError
from agentrag.exec import ThreadExecutor
from agentrag.records import Passage, Trajectory
from agentrag.runs import JsonlStore
from agentrag.synth.ragshaper import stages
from agentrag.synth.ragshaper.components import RagShaperComponents, seed_id
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.synth.ragshaper.lazy import StageIndex
from agentrag.synth.ragshaper.schema import InfoTree, QARecord
from agentrag.testing import FakeRetriever


def test_stage_index_reads_the_record_jsonl_store_reads(tmp_path: Path) -> None:
    store: JsonlStore[Trajectory] = JsonlStore(tmp_path / "t.jsonl", Trajectory)
    for i, q in enumerate(["plain", 'with "quotes" and \\ slash', "ünïcode ✓"]):
        store.append(Trajectory(id=f"t{i}" if i != 1 else 'id "1"\\x', question=q, answer="a"))
    with (tmp_path / "t.jsonl").open("a") as fh:  # a duplicate id later in the file: the first one counts
        fh.write(Trajectory(id="t0", question="later copy").model_dump_json() + "\n")
        fh.write('{"id": "t9", "question": "spaced JSON"}\n')
    index = StageIndex(tmp_path / "t.jsonl", Trajectory)
    assert {k: index[k] for k in index.offsets} == {t.id: t for t in store}
    assert index["t0"].question == "plain" and index['id "1"\\x'].question.startswith("with")
    assert len(StageIndex(tmp_path / "t.jsonl", Trajectory, {"t2", "nope"})) == 1
    again = pickle.loads(pickle.dumps(index))  # a Ray worker gets the offsets, not the records
    assert again["t9"].question == "spaced JSON"


def test_stage_index_names_file_and_line_of_a_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text('{"id": "a", "question": "q"}\n{"id": "b", "path_id": "p", "status": "nonsense"}\n')
    index = StageIndex(path, QARecord)
    with pytest.raises(UserError, match=r"qa.jsonl:2"):
        index["b"]


def test_stages_hold_the_records_of_the_items_in_flight_only(tmp_path: Path, monkeypatch: Any, frozen_heap: None) -> None:
    """The QA stage held every tree of the run, elicitation every question, the tagger every
    trajectory and filter decision. Now their work lists hold ids and their data byte offsets:
    each record is read when its item runs (once per item), and while QA runs (2 in flight) at
    most a few trees of the run are alive (the old code: all 30)."""
    from agentrag.synth.driver import SynthRun

    n = 30
    entities = [f"Ada Varn L{i}" for i in range(n)]
    ours = {seed_id(e) for e in entities}  # this run's trees only (not other tests' leftovers)
    trees_alive = 0

    def qa_counting(state: Any, item: Any, _fn: Any = stages._STAGES["qa"]) -> Any:
        nonlocal trees_alive
        # explore runs beside QA (a flow): no thread switch while gc.get_objects()'s list holds
        # another thread's tuples under construction (CPython's tuple resize then fails)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1000.0)
        try:
            gc.collect()
            alive = sum(isinstance(o, InfoTree) and o.id in ours for o in gc.get_objects())
        finally:
            sys.setswitchinterval(switch)
        trees_alive = max(trees_alive, alive)
        return _fn(state, item)
    monkeypatch.setitem(stages._STAGES, "qa", qa_counting)
    seen: dict[str, tuple[set[str], str]] = {}
    reads: Counter[str] = Counter()
    stage = SynthRun.stage

    def recording(self: Any, name: str, fn: Any, items: Any, *a: Any, **kw: Any) -> Any:
        items = list(items)
        seen[name] = ({type(i).__name__ for i in items}, type(getattr(fn, "data", None)).__name__)
        return stage(self, name, fn, items, *a, **kw)
    monkeypatch.setattr(SynthRun, "stage", recording)
    flow = SynthRun.flow

    def flow_recording(self: Any, steps: Any, first: Any, *a: Any, **kw: Any) -> Any:
        def rec(name: str, fn: Any) -> Any:  # a flow's stages see their items one by one
            types = seen.setdefault(name, (set(), type(getattr(fn, "data", None)).__name__))[0]
            return lambda item: types.add(type(item).__name__) or fn(item)
        return flow(self, {k: (rec(k, fn), w) for k, (fn, w) in steps.items()}, first, *a, **kw)
    monkeypatch.setattr(SynthRun, "flow", flow_recording)
    getitem = StageIndex.__getitem__

    def counting(self: Any, key: str) -> Any:
        reads[self.model.__name__] += 1
        return getitem(self, key)
    monkeypatch.setattr(StageIndex, "__getitem__", counting)

    def kb_tilde(passages: list[Passage]) -> FakeRetriever:
        return FakeRetriever(passages, kb="distractor")

    comps = RagShaperComponents(curator=curator_llm(), teacher=teacher_llm(), main_kb=main_retriever(),
                                distractor_kb=kb_tilde, tagger=curator_llm())
    cfg = RagShaperConfig()
    cfg.curator.max_depth = 4
    m = ShaperRun(tmp_path / "run", cfg, comps, executor=ThreadExecutor(2)).run(entities)
    funnel = {f["stage"]: (f["in"], f["out"]) for f in m["funnel"]}
    assert funnel["explore"][1] == n and funnel["elicit"][1] == funnel["qa"][1] >= n // 2
    assert funnel["tag"][1] == funnel["elicit"][1]
    assert seen["qa"] == ({"PathRecord"}, "StageIndex")
    assert seen["elicit"] == ({"Ref"}, "dict") and seen["tag"] == ({"Ref"}, "StageIndex")
    # one read per item: a tree per path, a question per elicitation, a trajectory and a decision per tag
    assert reads == {"InfoTree": funnel["qa"][0], "QARecord": funnel["elicit"][0],
                     "Trajectory": funnel["tag"][0], "FilterRecord": funnel["tag"][0]}, reads
    assert trees_alive <= 4
