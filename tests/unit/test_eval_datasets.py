from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrag.errors import UserError
from agentrag.eval.datasets import detect_format, load_dataset


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_hotpotqa_raw(data_dir):
    items = load_dataset(data_dir / "hotpotqa" / "dev_distractor_200.jsonl")
    assert len(items) == 200 and all(i.hops == 2 for i in items)
    first = items[0]
    assert first.id == "5a7f6fd75542992e7d278cfa" and first.golden_answers == ["Rush"]
    assert first.metadata["supporting_titles"] == ["Nobody's Hero", "Neil Peart"]
    assert first.metadata["type"] in {"bridge", "comparison"}
    assert len(first.supporting_passage_ids) == 2


@pytest.mark.parametrize("rel", ["hotpotqa/dev_distractor_200.jsonl", "2wikimultihopqa/dev_with_context_164.jsonl",
                                 "musique/train_100.jsonl"])
def test_gold_ids_are_the_kb_passage_ids(data_dir, rel):
    """The gold ids must name passages the KB ingests from the same file, with the gold titles."""
    from agentrag.kb.ingest import read_corpus

    corpus = {p.id: p for p in read_corpus(data_dir / rel)}
    for item in load_dataset(data_dir / rel):
        assert item.supporting_passage_ids, item.id
        titles = {corpus[pid].title for pid in item.supporting_passage_ids}  # KeyError = id mismatch
        assert titles == {" ".join(t.split()) for t in item.metadata["supporting_titles"]}


def test_2wiki_hops_by_type(data_dir):
    items = load_dataset(data_dir / "2wikimultihopqa" / "dev_with_context_164.jsonl")
    by_type = {}
    for i in items:
        by_type.setdefault(i.metadata["type"], set()).add(i.hops)
    assert by_type == {"comparison": {2}, "compositional": {2}, "inference": {2}, "bridge_comparison": {4}}
    assert all(len(i.supporting_passage_ids) == len(i.metadata["supporting_titles"]) for i in items)


def test_musique_hops_and_decomposition(data_dir):
    items = load_dataset(data_dir / "musique" / "train_100.jsonl")
    assert {i.hops for i in items} == {2, 3, 4}
    for i in items:
        assert i.hops == len(i.metadata["decomposition"])
        assert len(i.supporting_passage_ids) == len(i.metadata["supporting_titles"]) >= 1
    assert items[0].golden_answers == ["G. Stanley Hall", "Stanley Hall"]  # answer + aliases


@pytest.mark.parametrize("rel", ["nq/test_1000.jsonl", "popqa/test_1000.jsonl", "bamboogle/test_125.jsonl"])
def test_flashrag_files(data_dir, rel):
    items = load_dataset(data_dir / rel, limit=50)
    assert len(items) == 50 and all(i.golden_answers and i.hops is None for i in items)


def test_detect_format_and_override(tmp_path):
    p = _write(tmp_path / "f.jsonl", [{"id": "1", "question": "q?", "golden_answers": ["a"],
                                       "metadata": {"hops": 3}}])
    assert load_dataset(p)[0].hops == 3
    q = _write(tmp_path / "g.jsonl", [{"id": 7, "question": "q?", "golden_answers": ["a", 1990], "metadata": None}])
    item = load_dataset(q)[0]
    assert item.id == "7" and item.golden_answers == ["a", "1990"] and item.metadata == {}
    assert detect_format({"id": "x", "question": "q", "golden_answers": []}) == "flashrag"
    with pytest.raises(UserError, match="cannot tell the dataset format"):
        detect_format({"foo": 1}, path="x.jsonl", lineno=4)
    with pytest.raises(UserError, match="unknown dataset format"):
        load_dataset(p, fmt="squad")


@pytest.mark.parametrize("records, where", [
    ([{"id": "1", "question": "q", "golden_answers": ["a"]}, {"id": "2", "question": "q", "golden_answers": []}],
     r":2: field 'golden_answers'"),
    ([{"id": "1", "question": "", "golden_answers": ["a"]}], r":1: field 'question': empty"),
    ([{"id": "1", "question": "q", "golden_answers": ["a"]}, {"id": "1", "question": "q", "golden_answers": ["b"]}],
     r":2: field 'id': duplicate id '1'"),
    ([{"_id": "h", "question": "q", "answer": "a", "supporting_facts": [["T", 0]], "context": [["T", "oops"]]}],
     r":1: field 'context\[0\]'"),
    ([{"_id": "h", "question": "q", "supporting_facts": [], "context": []}], r":1: field 'answer': missing"),
    ([{"id": "m", "question": "q", "answer": "a", "paragraphs": [], "question_decomposition": [{"q": 1}]}],
     r":1: field 'question_decomposition\[0\]'"),
])
def test_bad_records_name_file_line_field(tmp_path, records, where):
    p = _write(tmp_path / "bad.jsonl", records)
    with pytest.raises(UserError, match=str(p).replace(".", r"\.") + where):
        load_dataset(p)


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(UserError, match="file not found"):
        load_dataset(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(UserError, match="no records"):
        load_dataset(tmp_path / "empty.jsonl")
