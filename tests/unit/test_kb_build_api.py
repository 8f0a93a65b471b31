"""``build_kb`` and ``serve_navigation``/``navigation_app`` from Python alone (issue 20: a Python
API for everything ``agentrag kb build`` and ``kb serve --navigation constrained`` do)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agentrag.errors import UserError
from agentrag.kb import KBConfig, KnowledgeBase, build_kb
from agentrag.kb.ingest import gold_passages, questions
from agentrag.kb.serving import navigation_app, open_kb
from agentrag.records import Passage
from agentrag.testing import HashEmbedder


def _slice(src: Path, dst: Path, n: int) -> Path:
    with src.open(encoding="utf-8") as f:
        dst.write_text("".join(line for _, line in zip(range(n), f, strict=False)), encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def hotpot(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _slice(data_dir / "hotpotqa" / "dev_distractor_200.jsonl", tmp_path_factory.mktemp("hp") / "dev20.jsonl",
                  20)


def test_build_kb_bm25_on_shared_hotpotqa_and_search(hotpot: Path, tmp_path: Path) -> None:
    kb = build_kb(hotpot, tmp_path / "kb", method="bm25", name="hotpot", progress=False)
    gold = gold_passages(hotpot)
    assert len(gold) == 20 and kb.gold() == gold  # gold ids collected from the raw file
    assert kb.params["embedder"] is None and kb.config.name == "hotpot"  # bm25: nothing embedded
    assert len(kb) == len(set(kb.ids())) >= 150  # 20 questions x ~10 pooled, deduplicated paragraphs
    hits = 0
    for qid, question, golds in questions(hotpot):
        found = kb.search([question], 10)[0]
        assert all(h.kb == "hotpot" and h.method == "bm25" for h in found)
        hits += bool(set(golds) & {h.id for h in found})
    assert hits >= 18  # BM25 finds a supporting paragraph for nearly every question
    again = KnowledgeBase.load(tmp_path / "kb")  # a plain directory, loadable without the corpus
    assert [h.id for h in again.search([question], 5)[0]] == [h.id for h in kb.search([question], 5)[0]]
    same = build_kb(hotpot, tmp_path / "kb", method="bm25", name="hotpot", progress=False)  # a verbatim rerun
    assert same.reused and not kb.reused and len(same) == len(kb) and same.gold() == gold
    with pytest.raises(UserError, match=r"already exists \(built from other files or settings\); pass another "
                                        r"output directory \(the CLI's --out\), or overwrite=True"):
        build_kb(hotpot, tmp_path / "kb", method="bm25")  # another name: another KB
    assert len(build_kb([hotpot], tmp_path / "kb", method="bm25", overwrite=True, progress=False)) == len(kb)


def test_build_kb_takes_an_embedder_object_a_config_and_overrides(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"title": f"Town {i}", "text": f"Town {i} lies on river {i}."}) + "\n"
                              for i in range(12)))
    yaml = tmp_path / "kb.yaml"
    yaml.write_text("name: towns\nhybrid:\n  rrf_k: 5\n")
    kb = build_kb([corpus], tmp_path / "kb", yaml, embedder=HashEmbedder(16), index_type="hnsw",
                  overrides=["hybrid.depth=50"], progress=False)
    assert kb.params["embedder"]["dim"] == 16  # the object given, not a loaded model
    assert (kb.config.name, kb.config.index.type, kb.config.hybrid.rrf_k, kb.config.hybrid.depth) == \
        ("towns", "hnsw", 5, 50)
    assert kb.gold() == {}  # no raw multi-hop file: no gold ids
    cfg = build_kb(corpus, tmp_path / "kb2", KBConfig(method="bm25"), name="n", progress=False).config
    assert (cfg.method, cfg.name) == ("bm25", "n")


@pytest.mark.parametrize("kwargs, words", [
    ({"fmt": "csv"}, "unknown corpus format 'csv'"),
    ({"method": "sparse"}, "method"),
    ({"overrides": ["nme=x"]}, "nme"),
])
def test_build_kb_bad_arguments_fail_before_writing(tmp_path: Path, kwargs: dict, words: str) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"title": "a", "text": "b"}) + "\n")
    with pytest.raises(UserError, match=words):
        build_kb(corpus, tmp_path / "kb", progress=False, **kwargs)
    assert not (tmp_path / "kb").exists() and not (tmp_path / "kb.partial").exists()


def test_navigation_app_serves_eq8_from_python(tmp_path: Path) -> None:
    emb = HashEmbedder(32)
    main = KnowledgeBase.build([Passage(id=f"k{i}", title=f"Town {i}", text=f"Town {i} was founded in {1800 + i}.")
                                for i in range(20)], tmp_path / "k", KBConfig(name="main"), embedder=emb,
                               progress=False)
    tilde = KnowledgeBase.build([Passage(id=f"x{i}", title=f"Town {i} (draft)", text=f"Town {i}: {1700 + i}.")
                                 for i in range(6)], tmp_path / "kt", KBConfig(name="distractor"), embedder=emb,
                                progress=False)
    client = TestClient(navigation_app(main, tilde, token="t", p_e=0.0, seed=1))
    auth = {"Authorization": "Bearer t"}
    assert client.get("/health").status_code == 401
    info = client.get("/health", headers=auth).json()
    assert info["navigation"] == "constrained" and info["p_e"] == 0.0 and info["method"] == "dense"
    body = {"queries": ["Town 3 founded"], "topk": 4, "trajectory_id": "r1", "return_scores": True}
    first = client.post("/retrieve", json=body, headers=auth).json()["result"][0]
    assert sum(d["document"]["id"].startswith("x") for d in first) == 2  # step 1 always mixes in K~ (Eq. 8)
    second = client.post("/retrieve", json=body, headers=auth).json()["result"][0]
    assert not any(d["document"]["id"].startswith("x") for d in second)  # K~ met at t-1, p_e = 0
    assert client.post("/retrieve", json={"queries": ["q"], "topk": 2}, headers=auth).status_code == 422
    with pytest.raises(UserError, match="no dense index"):  # the dense default fails at startup
        open_kb(KnowledgeBase.build([Passage(id="b", title="B", text="bm25 only")], tmp_path / "b",
                                    KBConfig(method="bm25"), progress=False), method="dense")


def test_build_kb_reuses_a_complete_kb_only_for_the_same_inputs(tmp_path: Path) -> None:
    import os

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"title": f"T{i}", "text": f"text {i}"}) + "\n" for i in range(6)))
    first = build_kb(corpus, tmp_path / "kb", method="bm25", progress=False)
    created = (tmp_path / "kb" / "params.json").read_text()
    again = build_kb(str(corpus), tmp_path / "kb", method="bm25", progress=False)
    assert again.reused and not first.reused and (tmp_path / "kb" / "params.json").read_text() == created
    st = corpus.stat()
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the corpus file changed
    with pytest.raises(UserError, match="built from other files or settings"):
        build_kb(corpus, tmp_path / "kb", method="bm25", progress=False)
    (tmp_path / "other").mkdir()  # a directory that is no KB: refused, never replaced
    with pytest.raises(UserError, match=r"other already exists; pass another output directory"):
        build_kb(corpus, tmp_path / "other", method="bm25", progress=False)
    assert list((tmp_path / "other").iterdir()) == []
