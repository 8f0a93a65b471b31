"""benchmarks/kb_scale.py's projection: a line through the largest two sizes, checked against the
smaller ones; at least three sizes are required."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kb_scale.py"


@pytest.fixture(scope="module")
def kb_scale() -> Any:
    sys.path.insert(0, str(SCRIPT.parent))  # its `from _shared import DATA`
    try:
        spec = importlib.util.spec_from_file_location("bench_kb_scale", SCRIPT)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return mod


def _run(n: int, mb: float, seconds: float) -> dict:
    return {"passages": n, "build": {"peak_rss_mb": mb, "seconds": seconds}}


def test_projection_goes_through_the_largest_two(kb_scale):
    runs = [_run(10_000, 150.0, 2.0), _run(100_000, 240.0, 20.0), _run(200_000, 340.0, 40.0)]
    key = ("build", "peak_rss_mb")
    # 100 MB per 100k passages between the largest two: 340 + 0.001 * (21M - 200k)
    assert kb_scale.project(runs[1], runs[2], key) == pytest.approx(340 + 0.001 * (kb_scale.WIKI18 - 200_000))
    assert kb_scale.project(runs[1], runs[2], key, 10_000) == pytest.approx(150.0)
    check = kb_scale.linearity(runs, key)
    assert "10,000: line 150, measured 150 (+0%)" in check and "100.0 / 100.0" in check
    bent = [_run(10_000, 300.0, 2.0), *runs[1:]]  # a large fixed cost at the small size: not on the line
    assert "(+100%)" in kb_scale.linearity(bent, key)
    # times: in proportion to the largest size, seconds per 100k passages at every size as the check
    assert kb_scale.project(runs[1], runs[2], ("build", "seconds")) == pytest.approx(40.0 * kb_scale.WIKI18 / 200_000)
    assert "20.0 / 20.0 / 20.0" in kb_scale.linearity(runs, ("build", "seconds"))


def test_a_falling_line_projects_flat(kb_scale):
    small, big = _run(100_000, 300.0, 1.0), _run(200_000, 290.0, 1.0)
    assert kb_scale.project(small, big, ("build", "peak_rss_mb")) == pytest.approx(290.0)


def test_two_sizes_are_refused():
    out = subprocess.run([sys.executable, str(SCRIPT), "--sizes", "1000,2000"], capture_output=True, text=True,
                         cwd=SCRIPT.parent)
    assert out.returncode == 2 and "at least three distinct sizes" in out.stderr


def test_dense_scale_refuses_two_sizes():
    dense = SCRIPT.with_name("kb_scale_dense.py")
    out = subprocess.run([sys.executable, str(dense), "--sizes", "1000,2000"], capture_output=True, text=True,
                         cwd=SCRIPT.parent)
    assert out.returncode == 2 and "at least three distinct sizes" in out.stderr
