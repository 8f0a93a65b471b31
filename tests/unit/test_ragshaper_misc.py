from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_ragshaper_support import main_retriever

from agentrag.errors import UserError
from agentrag.synth.ragshaper.components import read_seeds, seed_id
from agentrag.synth.ragshaper.config import DistractorConfig, RagShaperConfig
from agentrag.synth.ragshaper.distractors import write_distractors
from agentrag.synth.ragshaper.tree import InfoCurator
from agentrag.testing import ScriptedLLM


def test_read_seeds_text_and_jsonl(tmp_path: Path) -> None:
    txt = tmp_path / "seeds.txt"
    txt.write_text("# comment\nAda Varn\n\nLysa\nAda Varn\n")
    assert read_seeds(txt) == ["Ada Varn", "Lysa"]
    jl = tmp_path / "seeds.jsonl"
    jl.write_text('{"entity": "Ada Varn"}\n{"title": "Lysa"}\n')
    assert read_seeds(jl) == ["Ada Varn", "Lysa"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"entity": "Ada"}\n{"name": "x"}\n')
    with pytest.raises(UserError, match=r"bad.jsonl:2: field 'entity'"):
        read_seeds(bad)
    with pytest.raises(UserError, match="not found"):
        read_seeds(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n# nothing\n")
    with pytest.raises(UserError, match="no seed entities"):
        read_seeds(empty)
    assert seed_id("Ada Varn") == seed_id(" Ada Varn ") != seed_id("Lysa")


def test_distractor_writer_drops_copies_and_duplicates() -> None:
    docs_json = json.dumps({"documents": [{"title": "A", "text": "The fact."}, {"title": "B", "text": "Other 1900."},
                                          {"title": "C", "text": "other  1900."}]})
    docs, prov, err = write_distractors(ScriptedLLM([docs_json]), original_fact="the fact.", seed="s",
                                        distractor_type="subjective_fallacy", guideline="", seed_id="s1",
                                        node_id="n2", source_passage_id="p1", cfg=DistractorConfig(docs_per_call=3))
    assert err is None and [d.title for d in docs] == ["B"]
    assert docs[0].id == "s1.n2.d1" and docs[0].distractor_type == "subjective_fallacy"
    none, _, err = write_distractors(ScriptedLLM(['{"documents": []}']), original_fact="f", seed="s",
                                     distractor_type="bogus", guideline="", seed_id="s1", node_id="n2",
                                     source_passage_id=None, cfg=DistractorConfig())
    assert none == [] and err is not None and err.startswith("schema_failure")


def test_empty_query_falls_back_to_the_intent() -> None:
    reply = json.dumps({"intent": "Orn bridge year", "tool": "dense_retrieval", "query": ""})
    cfg = RagShaperConfig()
    cfg.curator.max_depth, cfg.curator.p_branch = 2, 0.0
    tree, _ = InfoCurator(ScriptedLLM(default=reply), main_retriever(), cfg).explore("s", "Ada Varn")
    for node in tree.nodes[1:]:
        assert node.action is not None and node.action.arguments["query"] == "Orn bridge year"
        assert node.docs and node.error is None


def test_teacher_reads_both_kbs_with_one_method() -> None:
    from agentrag.records import Hit
    from agentrag.synth.ragshaper.elicit import MethodRetriever

    class KBLike:
        def __init__(self) -> None:
            self.methods: list[str | None] = []

        def search(self, queries: list[str], k: int, threshold: float | None = None,
                   method: str | None = None) -> list[list[Hit]]:
            self.methods.append(method)
            return [[] for _ in queries]

    kb = KBLike()
    MethodRetriever(kb, "dense").search(["q"], 3)
    assert kb.methods == ["dense"]
    plain = main_retriever()  # no method argument: passed through untouched
    assert MethodRetriever(plain, "dense").search(["Ott Brem merchant company"], 1)[0][0].id == "p3"


def test_cli_reports_missing_inputs_as_user_errors(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["synth", "ragshaper", "--out", str(tmp_path / "r"), "--seeds", "2"])
    assert res.exit_code == 2 and "no knowledge base" in res.output
    res = runner.invoke(app, ["synth", "ragshaper", "--out", str(tmp_path / "r"), "--kb", str(tmp_path),
                              "--seeds", "2", "--set", "curator.max_dept=3"])
    assert res.exit_code == 2 and "did you mean 'max_depth'" in res.output
    res = runner.invoke(app, ["synth", "ragshaper", "--out", str(tmp_path / "r"), "--kb", str(tmp_path)])
    assert res.exit_code == 2 and "no seeds" in res.output


def test_cli_preset_option(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentrag.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["synth", "ragshaper", "--out", str(tmp_path / "r"), "--kb", str(tmp_path),
                              "--seeds", "2", "--preset", "huge"])
    assert res.exit_code == 2 and "unknown preset 'huge'" in res.output
    # the preset is the base; --set overrides it (validated before the KB is opened)
    res = runner.invoke(app, ["synth", "ragshaper", "--out", str(tmp_path / "r"), "--preset", "paper",
                              "--set", "curator.max_depth=abc"])
    assert res.exit_code == 2 and "max_depth" in res.output
