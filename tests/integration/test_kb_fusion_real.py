"""The default hybrid fusion is at least as good as the better single method on a shared file it was
not tuned on (benchmarks/fusion.py tunes on 2Wiki train_600; this is 2Wiki dev_164), with a KB
built from that file as a new user would (`agentrag kb build FILE`, default config, real embedder)."""

import pytest

from agentrag.kb import build_kb
from agentrag.kb.config import HybridConfig
from agentrag.kb.recall import eval_recall

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_default_hybrid_at_least_the_best_single_method_off_the_tune_set(data_dir, tmp_path):
    src = data_dir / "2wikimultihopqa" / "dev_with_context_164.jsonl"
    kb = build_kb(src, tmp_path / "kb", progress=False)
    assert kb.config.hybrid == HybridConfig()
    table = eval_recall(kb, src, ks=(10,))
    assert table["questions"] == 164 and table["missing_gold"] == 0
    got = {m: table["methods"][m][10]["all"] for m in ("bm25", "dense", "hybrid")}
    assert got["hybrid"] >= max(got["bm25"], got["dense"]), got
