"""Filtering (§3.4): keep trajectories whose predicted answer has F1 > 0.9 against the synthesized
answer, and export the kept ones as SFT data (TRL conversational + LLaMA-Factory sharegpt)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agentrag.eval.metrics import f1
from agentrag.records import Trajectory
from agentrag.synth.ragshaper.schema import FilterRecord

log = logging.getLogger(__name__)


def filter_trajectory(traj: Trajectory, answer: str, threshold: float = 0.9) -> FilterRecord:
    """The keep/drop decision for one trajectory (strictly above ``threshold``)."""
    score = f1(traj.answer, [answer]) if traj.answer else 0.0
    kept = score > threshold
    reason = None if kept else f"f1={score:.3f} <= {threshold} (finish_reason={traj.finish_reason})"
    return FilterRecord(id=traj.id, qa_id=str(traj.metadata.get("qa_id", "")), prediction=traj.answer,
                        answer=answer, f1=round(score, 4), kept=kept, reason=reason)


def malformed_turns(traj: Trajectory) -> int:
    """Assistant turns the agent flagged as malformed: an error on the step that is not a failed
    search (bad tool JSON or arguments, an unknown tool, extra parallel calls, an empty reply,
    text without answer tags). Such turns would teach the student the wrong format."""
    return sum(1 for s in traj.steps if s.error and not s.error.startswith("the search failed"))


def export_sft(trajs: list[Trajectory], out_dir: Path, tools: list[dict[str, Any]],
               system_prompt: str) -> dict[str, Any]:
    """Write TRL conversational + LLaMA-Factory sharegpt files (and ``dataset_info.json``) into
    ``out_dir`` via the export area; returns its summary (counts and file paths)."""
    from agentrag.export.sft import write_sft_export

    return write_sft_export(out_dir, trajs, system_prompt, tools)


__all__ = ["filter_trajectory", "malformed_turns", "export_sft"]
