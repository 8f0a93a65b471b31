import json

from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.ingest import gold_passages, pooled_passages
from agentrag.testing import HashEmbedder

runner = CliRunner()

HOTPOT = [
    {"_id": f"q{i}", "question": q, "answer": "x", "type": "bridge", "level": "hard",
     "supporting_facts": [[t1, 0], [t2, 0]],
     "context": [[t1, [s1]], [t2, [s2]], [f"Filler {i}", ["Nothing relevant here at all."]]]}
    for i, (q, t1, s1, t2, s2) in enumerate([
        ("Which band did Jeff Porcaro drum for?", "Jeff Porcaro", "Jeff Porcaro drummed for Toto.",
         "Toto", "Toto is a rock band from Los Angeles."),
        ("In which capital is the Eiffel Tower?", "Eiffel Tower", "The Eiffel Tower stands in Paris.",
         "Paris", "Paris is the capital of France."),
    ])
]


def _hotpot(tmp_path):
    f = tmp_path / "hotpot.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in HOTPOT))
    return f


def test_build_malformed_input_exits_2_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "a", "text": "fine"}\n{"title": "b"}\n')
    res = runner.invoke(app, ["kb", "build", str(bad), "--out", str(tmp_path / "kb")])
    assert res.exit_code == 2
    assert "bad.jsonl:2" in res.output and "'text'" in res.output
    assert not (tmp_path / "kb").exists()


def test_stats_search_and_eval_recall_commands(tmp_path):
    f = _hotpot(tmp_path)
    KnowledgeBase.build(pooled_passages([f]), tmp_path / "kb", KBConfig(name="demo"), embedder=HashEmbedder(32),
                        gold=gold_passages(f), progress=False)
    res = runner.invoke(app, ["kb", "stats", str(tmp_path / "kb")])
    assert res.exit_code == 0 and "passages=6" in res.output and "questions with gold ids: 2" in res.output
    res = runner.invoke(app, ["kb", "search", str(tmp_path / "kb"), "Jeff Porcaro drummer", "-k", "1",
                              "--method", "bm25"])
    assert res.exit_code == 0 and "Jeff Porcaro" in res.output
    out = tmp_path / "recall.json"
    res = runner.invoke(app, ["kb", "eval-recall", str(tmp_path / "kb"), str(f), "--methods", "bm25", "--ks", "2,5",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    table = json.loads(out.read_text())[0]
    assert table["questions"] == 2 and table["methods"]["bm25"]["5"]["all"] == 1.0
    assert "all@2" in res.output
    res = runner.invoke(app, ["kb", "search", str(tmp_path / "kb"), "x", "--method", "nope"])
    assert res.exit_code == 2 and "unknown retrieval method" in res.output
