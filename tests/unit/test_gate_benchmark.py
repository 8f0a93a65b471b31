"""The gate benchmark's fast subset: generated cases from the shared training files, every gate
scored per family; with the label verifier every family meets the 95%/95% bar. The full run is
``benchmarks/gates.py`` (docs/gates.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from gatebench.adapters import all_gates  # noqa: E402
from gatebench.cases import LabelVerifier, score  # noqa: E402
from gatebench.families import FAMILIES, generate  # noqa: E402
from gatebench.sources import load_items  # noqa: E402


@pytest.fixture(scope="module")
def cases(data_dir):
    return generate(load_items("train", limit_per_file=25), seed=1, per_family_cap=60)


def test_the_benchmark_has_families_both_ways(cases):
    assert len(FAMILIES) >= 20
    fams = {c.family for c in cases}
    assert fams == set(FAMILIES)
    for fam in fams:
        labels = {c.label for c in cases if c.family == fam}
        assert labels == {"keep", "reject"} or fam == "and_names", (fam, labels)


def test_every_family_meets_the_bar_with_the_verifier(cases):
    rows = score(all_gates(), cases, verifier=True)
    below = [(r["synth"], r["gate"], r["family"], round(r["recall"], 3), round(r["false_rejection"], 3))
             for r in rows if r["recall"] < 0.95 or r["false_rejection"] > 0.05]
    assert below == []


def test_semantic_families_need_the_verifier(cases):
    """Lexical checks alone cannot reject a role swap: the benchmark can tell a gate that asks the
    verifier from one that does not."""
    rows = {(r["gate"], r["family"]): r for r in score(all_gates(), cases, verifier=False) if r["synth"] == "shared"}
    assert rows[("answer_support", "role_swap")]["recall"] < 0.5


def test_the_label_verifier_answers_from_the_label():
    from agentrag.synth.verifier import verify

    keep, _, _ = verify(LabelVerifier("keep"), "single_document", ["doc"], stage="t", question="q", answer="a")
    assert keep is True
    keep, _, _ = verify(LabelVerifier("reject"), "role", ["doc"], stage="t", question="q", answer="a")
    assert keep is False
