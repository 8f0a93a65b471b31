import json

import pytest

from agentrag.errors import UserError
from agentrag.kb.ingest import gold_passages, passage_id, pooled_passages, questions, read_corpus


def _write(path, lines):
    path.write_text("".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines), encoding="utf-8")
    return path


HOTPOT = {"_id": "q1", "question": "Who drummed?", "answer": "Jeff", "type": "bridge", "level": "hard",
          "supporting_facts": [["Jeff Porcaro", 0], ["Toto", 1]],
          "context": [["Jeff Porcaro", ["Jeff was a drummer.", " He played in Toto."]],
                      ["Toto", ["Toto is a band.", " From LA."]],
                      ["Other", ["Unrelated text."]]]}
MUSIQUE = {"id": "m1", "question": "Where?", "answer": "x", "answerable": True,
           "paragraphs": [{"idx": 0, "title": "Toto", "paragraph_text": "Toto is a band. From LA.",
                           "is_supporting": True},
                          {"idx": 1, "title": "Else", "paragraph_text": "Something else.", "is_supporting": False}]}


def test_flashrag_title_first_line_and_unquoted(tmp_path):
    f = _write(tmp_path / "c.jsonl", [{"id": "1", "contents": '"Evan Morris"\nEvan L. Morris was a lobbyist.'},
                                       {"id": 2, "contents": "Plain\nSome  text\nmore"}])
    ps = list(read_corpus(f))
    assert [(p.id, p.title) for p in ps] == [("1", "Evan Morris"), ("2", "Plain")]
    assert ps[0].text == "Evan L. Morris was a lobbyist."
    assert ps[1].text == "Some text more"


def test_title_text_json_and_jsonl(tmp_path):
    f = _write(tmp_path / "c.jsonl", [{"title": "A", "text": "alpha"}, {"title": "B", "text": "beta", "id": "b"}])
    ps = list(read_corpus(f))
    assert ps[0].id == passage_id("A", "alpha") and ps[1].id == "b"
    j = tmp_path / "c.json"
    j.write_text(json.dumps([{"title": "A", "text": "alpha"}]))
    assert [p.text for p in read_corpus(j)] == ["alpha"]


def test_pooled_contexts_dedup_and_gold(tmp_path):
    h = _write(tmp_path / "hotpot.jsonl", [HOTPOT])
    m = _write(tmp_path / "musique.jsonl", [MUSIQUE])
    ps = list(pooled_passages([h, m]))
    # "Toto is a band. From LA." appears in both files: kept once
    assert sorted(p.title for p in ps) == ["Else", "Jeff Porcaro", "Other", "Toto"]
    gh = gold_passages(h)
    gm = gold_passages(m)
    toto = passage_id("Toto", "Toto is a band. From LA.")
    assert gh == {"q1": [passage_id("Jeff Porcaro", "Jeff was a drummer. He played in Toto."), toto]}
    assert gm == {"m1": [toto]}
    assert {p.id for p in ps} >= set(gh["q1"])
    assert list(questions(h))[0][:2] == ("q1", "Who drummed?")


@pytest.mark.parametrize("first, line, needle", [
    ('{"id": "0", "contents": "T\\nfine"}', '{"id": "1", "contents": "T\\nx"', "invalid JSON"),
    ('{"id": "0", "contents": "T\\nfine"}', '{"id": "1"}', "'contents'"),
    ('{"id": "0", "contents": "T\\nfine"}', '{"id": "1", "contents": "T\\n  "}', "'contents'"),
    ('{"title": "T", "text": "ok"}', '{"title": "T", "text": ""}', "'text'"),
    ('{"title": "T", "text": "ok"}', '{"title": "T", "text": 5}', "'text'"),
    ('{"title": "T", "text": "ok"}', '[1, 2]', "JSON object"),
])
def test_malformed_input_names_file_line_and_field(tmp_path, first, line, needle):
    f = tmp_path / "bad.jsonl"
    f.write_text(first + "\n" + line + "\n")
    with pytest.raises(UserError) as e:
        list(read_corpus(f))
    assert f"{f}:2" in str(e.value) and needle in str(e.value)


def test_undecodable_bytes(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_bytes(b'{"title": "a", "text": "ok"}\n{"title": "\xff", "text": "x"}\n')
    with pytest.raises(UserError, match=r"bad.jsonl:2: not valid UTF-8"):
        list(read_corpus(f))


def test_bad_multihop_record(tmp_path):
    bad = dict(HOTPOT, context=[["T", 5]])
    f = _write(tmp_path / "h.jsonl", [HOTPOT, bad])
    with pytest.raises(UserError, match=r"h.jsonl:2: context.0"):
        list(read_corpus(f))


def test_unknown_format(tmp_path):
    f = _write(tmp_path / "x.jsonl", [{"foo": 1}])
    with pytest.raises(UserError, match="cannot tell the corpus format"):
        list(read_corpus(f))
    with pytest.raises(UserError, match="unknown corpus format"):
        list(read_corpus(f, "nope"))


def test_passage_id_is_whitespace_insensitive_and_distinct():
    assert passage_id("A", "x  y") == passage_id("A ", "x y")
    assert passage_id("A", "x") != passage_id("B", "x")


def test_raw_hotpot_json_list_and_file_format(tmp_path):
    from agentrag.kb.ingest import file_format

    f = tmp_path / "hotpot_dev.json"
    f.write_text(json.dumps([HOTPOT]))
    assert file_format(f) == "hotpotqa"
    assert file_format(_write(tmp_path / "m.jsonl", [MUSIQUE])) == "musique"
    assert len(list(read_corpus(f))) == 3 and list(gold_passages(f)) == ["q1"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(UserError, match="no records"):
        file_format(empty)
