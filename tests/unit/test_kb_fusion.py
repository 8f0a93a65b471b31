"""The fusion math of agentrag.kb.fusion on hand-computed cases."""

import math

import pytest

from agentrag.kb.config import HybridConfig
from agentrag.kb.fusion import confidence, fuse, normalise, rrf_fuse, score_fuse
from agentrag.kb.indexes import rrf_fuse as rrf_from_indexes

BM25 = [(1, 3.0), (2, 2.0), (3, 1.0)]
DENSE = [(2, 0.8), (4, 0.4)]
RUNS = {"bm25": [BM25], "dense": [DENSE]}
S = math.sqrt(1.5)  # z of 3.0 in [3, 2, 1]: (3 - 2) / sqrt(2/3)


def _approx(fused):
    return [(row, pytest.approx(score)) for row, score in fused]


def test_rrf_hand_computed_and_reexported():
    assert rrf_from_indexes is rrf_fuse
    fused = rrf_fuse(RUNS, {"bm25": 1.0, "dense": 1.0}, 60)[0]
    assert fused == _approx([(2, 1 / 62 + 1 / 61), (1, 1 / 61), (4, 1 / 62), (3, 1 / 63)])
    weighted = rrf_fuse(RUNS, {"bm25": 1.0, "dense": 2.0}, 10)[0]
    assert weighted == _approx([(2, 1 / 12 + 2 / 11), (4, 2 / 12), (1, 1 / 11), (3, 1 / 13)])


def test_rrf_ties_break_by_row_and_zero_weight_drops_a_run():
    swapped = {"bm25": [[(7, 1.0), (5, 0.5)]], "dense": [[(5, 0.9), (7, 0.1)]]}
    assert [r for r, _ in rrf_fuse(swapped, {}, 60)[0]] == [5, 7]
    only_bm25 = rrf_fuse(RUNS, {"bm25": 1.0, "dense": 0.0}, 60)[0]
    assert [r for r, s in only_bm25 if s > 0] == [1, 2, 3]


def test_minmax_hand_computed_with_docs_missing_from_one_run():
    # bm25 normalised 1, .5, 0; dense 1, 0; rows absent from a run get 0
    fused = score_fuse(RUNS, {"bm25": 0.4, "dense": 0.6}, "minmax")[0]
    assert fused == _approx([(2, 0.4 * 0.5 + 0.6), (1, 0.4), (3, 0.0), (4, 0.0)])


def test_zscore_hand_computed_absent_rows_get_the_runs_lowest_z():
    # bm25 z: S, 0, -S (floor -S); dense z: 1, -1 (floor -1)
    fused = score_fuse(RUNS, {"bm25": 1.0, "dense": 1.0}, "zscore")[0]
    assert fused == _approx([(2, 1.0), (1, S - 1), (3, -S - 1), (4, -S - 1)])


def test_adaptive_zscore_scales_each_run_by_its_top_z():
    # confidences: bm25 S, dense 1
    fused = score_fuse(RUNS, {"bm25": 1.0, "dense": 1.0}, "zscore", adaptive=True)[0]
    assert fused == _approx([(2, 1.0), (1, S * S - 1), (3, -S * S - 1), (4, -S * S - 1)])
    # the same confidences with min-max: bm25 1, .5, 0 (floor 0); dense 1, 0 (floor 0)
    assert score_fuse(RUNS, {"bm25": 1.0, "dense": 1.0}, "minmax", adaptive=True)[0] == \
        _approx([(2, S * 0.5 + 1.0), (1, S), (3, 0.0), (4, 0.0)])
    # and with RRF (k 10): weights S and 1
    assert rrf_fuse(RUNS, {}, 10, adaptive=True)[0] == \
        _approx([(2, S / 12 + 1 / 11), (1, S / 11), (3, S / 13), (4, 1 / 12)])
    assert confidence([]) == 0.0 and confidence([(1, 2.0), (2, 2.0)]) == 0.0
    # every run flat: no confidence anywhere, the plain weights decide (not all-zero scores)
    flat = {"bm25": [[(1, 2.0), (2, 2.0)]], "dense": [[(3, 0.5), (4, 0.5)]]}
    assert score_fuse(flat, {"bm25": 0.6, "dense": 0.4}, "minmax", adaptive=True)[0] == \
        _approx([(1, 0.6), (2, 0.6), (3, 0.4), (4, 0.4)])
    assert rrf_fuse(flat, {"bm25": 1.0, "dense": 2.0}, 10, adaptive=True)[0] == \
        _approx([(3, 2 / 11), (4, 2 / 12), (1, 1 / 11), (2, 1 / 12)])


def test_normalisation_with_constant_scores():
    assert normalise([(1, 2.0), (2, 2.0)], "minmax") == ({1: 1.0, 2: 1.0}, 0.0)
    assert normalise([(1, 2.0), (2, 2.0)], "zscore") == ({1: 0.0, 2: 0.0}, 0.0)
    assert normalise([], "zscore") == ({}, 0.0)
    flat = {"bm25": [[(1, 2.0), (2, 2.0)]], "dense": [[(3, 0.5), (1, 0.1)]]}
    # min-max: a flat run still says "listed" (1) vs "absent" (0)
    assert score_fuse(flat, {"bm25": 0.6, "dense": 0.4}, "minmax")[0] == _approx([(1, 0.6), (2, 0.6), (3, 0.4)])
    # z-score: a flat run adds nothing; the order is dense's (row 2, absent from dense, gets its floor)
    assert score_fuse(flat, {}, "zscore")[0] == _approx([(3, 1.0), (1, -1.0), (2, -1.0)])
    assert score_fuse(flat, {}, "zscore", adaptive=True)[0] == _approx([(3, 1.0), (1, -1.0), (2, -1.0)])


def test_empty_runs_and_mismatched_query_counts():
    assert score_fuse({"bm25": [[]], "dense": [[(4, 0.3)]]}, {}, "zscore")[0] == [(4, 0.0)]
    assert rrf_fuse({"bm25": [[]], "dense": [[]]}, {}, 60) == [[]]
    assert rrf_fuse({}, {}, 60) == []
    with pytest.raises(ValueError, match="different numbers of queries"):
        score_fuse({"bm25": [BM25], "dense": [DENSE, DENSE]}, {}, "minmax")
    with pytest.raises(ValueError, match="normalisation"):
        normalise(BM25, "softmax")


def test_fuse_dispatches_on_the_config():
    rrf = HybridConfig(fusion="rrf", weights={"bm25": 1.0, "dense": 2.0}, rrf_k=10, adaptive=False)
    assert fuse(RUNS, rrf) == rrf_fuse(RUNS, rrf.weights, 10)
    assert fuse(RUNS, HybridConfig(fusion="rrf", rrf_k=10)) == rrf_fuse(RUNS, HybridConfig().weights, 10, adaptive=True)
    z = HybridConfig(fusion="zscore", weights={"bm25": 1.0, "dense": 1.0}, adaptive=True)
    assert fuse(RUNS, z) == score_fuse(RUNS, z.weights, "zscore", adaptive=True)
    mm = HybridConfig(fusion="minmax", weights={"bm25": 0.4, "dense": 0.6}, adaptive=False)
    assert fuse(RUNS, mm) == score_fuse(RUNS, mm.weights, "minmax")


# ---- the KB's hybrid search and KBs saved before `fusion` existed ---------------------------------------------

DOCS = [("Paris", "Paris is the capital and largest city of France."),
        ("Berlin", "Berlin is the capital of Germany and its largest city."),
        ("Toto", "Toto is an American rock band formed in 1977 in Los Angeles."),
        ("Jeff Porcaro", "Jeff Porcaro was an American drummer and a founding member of Toto."),
        ("Python", "Python is a programming language that emphasises readability.")]
QUERIES = ["capital largest city", "American drummer of Toto"]


def _kb(tmp_path, **hybrid):
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.records import Passage
    from agentrag.testing import HashEmbedder

    passages = [Passage(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(DOCS)]
    return KnowledgeBase.build(passages, tmp_path / "kb", KBConfig(hybrid=hybrid), embedder=HashEmbedder(64),
                               progress=False)


@pytest.mark.parametrize("hybrid", [{"fusion": "rrf", "rrf_k": 5.0, "adaptive": False}, {"fusion": "minmax"},
                                    {"fusion": "zscore", "adaptive": True, "weights": {"bm25": 0.3, "dense": 0.7}}])
def test_kb_hybrid_is_the_configured_fusion_of_its_runs(tmp_path, hybrid):
    kb = _kb(tmp_path, **hybrid)
    runs = {m: kb.rank(QUERIES, kb.config.hybrid.depth, m) for m in ("bm25", "dense")}
    expected = fuse(runs, kb.config.hybrid)
    hits = kb.search(QUERIES, 3, method="hybrid")
    assert [[h.id for h in r] for r in hits] == [[f"d{row}" for row, _ in e[:3]] for e in expected]
    assert [[h.score for h in r] for r in hits] == [[pytest.approx(s) for _, s in e[:3]] for e in expected]


def _save_as_before_fusion(kb, hybrid):
    import json

    p = kb.directory / "params.json"
    params = json.loads(p.read_text())
    params["config"]["hybrid"] = hybrid
    p.write_text(json.dumps(params))


def test_kb_saved_with_the_former_defaults_loads_with_todays(tmp_path):
    from agentrag.kb import KnowledgeBase
    from agentrag.kb.config import FORMER_HYBRID
    from agentrag.testing import HashEmbedder

    kb = _kb(tmp_path)
    _save_as_before_fusion(kb, {**FORMER_HYBRID, "depth": 100})
    again = KnowledgeBase.load(kb.directory, embedder=HashEmbedder(64))
    assert again.config.hybrid == HybridConfig()
    assert [[h.id for h in r] for r in again.search(QUERIES, 3)] == [[h.id for h in r] for r in kb.search(QUERIES, 3)]


def test_kb_saved_with_chosen_rrf_settings_keeps_them(tmp_path):
    from agentrag.kb import KnowledgeBase
    from agentrag.testing import HashEmbedder

    kb = _kb(tmp_path)
    _save_as_before_fusion(kb, {"weights": {"bm25": 1.0, "dense": 0.7}, "rrf_k": 10.0, "depth": 50})
    again = KnowledgeBase.load(kb.directory, embedder=HashEmbedder(64))
    assert again.config.hybrid == HybridConfig(fusion="rrf", weights={"bm25": 1.0, "dense": 0.7}, rrf_k=10, depth=50,
                                               adaptive=False)
    runs = {m: again.rank(QUERIES, 50, m) for m in ("bm25", "dense")}
    assert [[h.id for h in r] for r in again.search(QUERIES, 3, method="hybrid")] == \
        [[f"d{row}" for row, _ in e[:3]] for e in rrf_fuse(runs, {"bm25": 1.0, "dense": 0.7}, 10)]
    # a search-time override of the fusion method wins over the saved RRF
    z = KnowledgeBase.load(kb.directory, embedder=HashEmbedder(64), overrides=["hybrid.fusion=zscore"])
    assert z.config.hybrid.fusion == "zscore"
