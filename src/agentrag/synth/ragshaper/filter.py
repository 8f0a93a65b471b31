"""Filtering (§3.4): keep trajectories whose predicted answer has F1 > 0.9 against the synthesized
answer (the official EM/F1 normalization, :mod:`agentrag.eval.metrics`), is no no-answer
(:func:`agentrag.match.is_no_answer`) and whose final answer is in the answer format, and export the kept ones as SFT data
(TRL conversational + LLaMA-Factory sharegpt)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentrag.agents.messages import answer_of
from agentrag.eval.metrics import f1
from agentrag.match import equivalent, is_no_answer
from agentrag.records import Trajectory
from agentrag.synth.ragshaper.schema import FilterRecord

log = logging.getLogger(__name__)


def answer_format_error(traj: Trajectory) -> str | None:
    """Why an answered trajectory's final answer is not in the answer format the SFT data teaches
    (``<answer>`` tags in the last assistant message, or a ``Final_Answer`` call), else ``None``.
    An untagged text, a JSON ``{"answer": ...}`` reply or an answer that differs from what the
    last message says would teach the student a wrong final turn."""
    if not traj.answer:
        return None
    if not traj.steps:
        return "an answer without a final assistant turn"
    said = answer_of(traj.steps[-1])
    if said is None:
        return "the final answer is not inside <answer></answer> tags (nor a Final_Answer call)"
    if not equivalent(said, traj.answer):
        return f"the answer {traj.answer!r} is not what the final turn's answer tags say ({said!r})"
    return None


def filter_trajectory(traj: Trajectory, answer: str, threshold: float = 0.9) -> FilterRecord:
    """The keep/drop decision for one trajectory: kept when its final answer is in the answer
    format (:func:`answer_format_error`), says there is an answer, and its F1 is strictly above
    ``threshold``. The reason of a drop is named ``answer_not_in_format: ...``, ``no_answer: ...``
    or ``f1_below_threshold: ...``."""
    score = f1(traj.answer, [answer]) if traj.answer else 0.0
    form = answer_format_error(traj)
    no_answer = bool(traj.answer) and is_no_answer(traj.answer)
    kept = score > threshold and form is None and not no_answer
    reason = None
    if form is not None:
        reason = f"answer_not_in_format: {form}"
    elif no_answer:
        reason = f"no_answer: the prediction {traj.answer!r} says there is no answer"
    elif not kept:
        reason = f"f1_below_threshold: f1={score:.3f} <= {threshold} (finish_reason={traj.finish_reason})"
    return FilterRecord(id=traj.id, qa_id=str(traj.metadata.get("qa_id", "")), prediction=traj.answer,
                        answer=answer, f1=round(score, 4), kept=kept, reason=reason)


def malformed_turns(traj: Trajectory) -> int:
    """Assistant turns the agent flagged as malformed: an error on the step that is not a failed
    search (bad tool JSON or arguments, an unknown tool, extra parallel calls, an empty reply,
    text without answer tags), plus the final turn when the answer is not in the answer format.
    Such turns would teach the student the wrong format."""
    bad = sum(1 for s in traj.steps if s.error and not s.error.startswith("the search failed"))
    return bad + (1 if answer_format_error(traj) else 0)


def export_sft(trajs: Iterable[Trajectory], out_dir: Path, tools: list[dict[str, Any]],
               system_prompt: str) -> dict[str, Any]:
    """Write TRL conversational + LLaMA-Factory sharegpt files (and ``dataset_info.json``) into
    ``out_dir`` via the export area; returns its summary (counts and file paths). ``trajs`` that
    is not an iterator (a list, :func:`~agentrag.synth.ragshaper.pipeline.kept_trajectories`) is read once
    per file."""
    from agentrag.export.sft import write_sft_export

    return write_sft_export(out_dir, trajs, system_prompt, tools)


__all__ = ["filter_trajectory", "malformed_turns", "answer_format_error", "export_sft"]
