"""RAGShaper's stages read their items' records from the stage files (issue 27, part 3: peak
memory): QA synthesis, elicitation and the tagger hold the records of the items in flight, not
every tree, question or trajectory of the run; :class:`StageIndex` reads what JsonlStore reads."""

from __future__ import annotations

import gc
import pickle
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
from agentrag.synth.ragshaper.components import RagShaperComponents
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


def test_stages_hold_the_records_of_the_items_in_flight_only(tmp_path: Path, monkeypatch: Any) -> None:
    """The QA stage held every tree of the run, the tagger every trajectory: counted here while
    each item runs (with 2 items in flight), they are at most a few, whatever the run's size."""
    alive: dict[str, int] = Counter()
    models = {"qa": InfoTree, "elicit": QARecord, "tag": Trajectory}

    def live(model: type) -> int:
        gc.collect()
        return sum(isinstance(o, model) for o in gc.get_objects())

    before = {stage: live(model) for stage, model in models.items()}  # other tests' leftovers

    def count(stage: str, model: type) -> None:
        alive[stage] = max(alive[stage], live(model) - before[stage])

    for stage, model in models.items():
        fn = stages._STAGES[stage]

        def wrapped(state: Any, item: Any, _fn: Any = fn, _s: str = stage, _m: type = model) -> Any:
            count(_s, _m)
            return _fn(state, item)
        monkeypatch.setitem(stages._STAGES, stage, wrapped)

    def kb_tilde(passages: list[Passage]) -> FakeRetriever:
        return FakeRetriever(passages, kb="distractor")

    comps = RagShaperComponents(curator=curator_llm(), teacher=teacher_llm(), main_kb=main_retriever(),
                                distractor_kb=kb_tilde, tagger=curator_llm())
    cfg = RagShaperConfig()
    cfg.curator.max_depth = 4
    n = 12
    m = ShaperRun(tmp_path / "run", cfg, comps, executor=ThreadExecutor(2)).run([f"Ada Varn {i}" for i in range(n)])
    funnel = {f["stage"]: f["out"] for f in m["funnel"]}
    assert funnel["explore"] == n and funnel["elicit"] >= n and funnel["tag"] >= n
    # the items in flight (2), the one a thread reads, the last of a finished loop; was all of the run
    assert alive["qa"] <= 3 and alive["elicit"] <= 4 and alive["tag"] <= 5, dict(alive)
