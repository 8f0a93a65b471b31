"""A rerun of a finished synthesizer run (the same command again) asks the model nothing and keeps
the run's record: shared by the embedded-model pipeline tests."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cached_responses(out: Path) -> int:
    """How many LLM responses the run's cache holds (a call that reached the model adds one)."""
    db = sqlite3.connect(out / "llm_cache.sqlite")
    try:
        return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
    finally:
        db.close()


def rerun_pays_nothing(out: Path, rerun: Callable[[], Any]) -> dict[str, Any]:
    """Run ``rerun`` on the finished run ``out``: no response is added to its LLM cache, every
    record file and the run's record (metrics.json, report.md) stay byte-identical. Returns the
    metrics."""
    files = [*out.glob("*.jsonl"), out / "metrics.json", out / "report.md"]
    before = {p.name: p.read_bytes() for p in files if p.exists()}
    assert before.get("metrics.json"), f"{out} has no metrics.json: the run did not finish"
    responses = cached_responses(out)
    rerun()
    assert cached_responses(out) == responses, "the rerun asked the model again"
    assert {p.name: p.read_bytes() for p in files if p.exists()} == before
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))
