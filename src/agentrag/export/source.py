"""What ``agentrag export sft --trajectories FILE`` reads: a trajectories JSONL file, or an eval
run's ``results.jsonl`` (one EvalResult per line, each carrying its trajectory) with a filter for
rejection-sampled SFT (keep only the questions the agent got right).

The kind of file is decided by its first record: an object with ``golden_answers`` and a
``trajectory`` key is an eval result, anything else is read as a Trajectory. A filter on a
trajectories file is refused (a trajectory has no verdict to filter on).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from agentrag.errors import UserError
from agentrag.records import Trajectory, iter_json_objects

Where = Literal["correct", "em"]


@dataclass(frozen=True)
class ResultFilter:
    """Which eval results to export: ``where="correct"`` keeps ``correct is True`` (the judge
    verdict when a judge ran, else EM); ``"em"`` keeps EM 1; ``min_judge`` keeps judge >= N (a
    result whose judge failed, ``judge is None``, is dropped)."""

    where: Where | None = None
    min_judge: int | None = None

    @property
    def active(self) -> bool:
        return self.where is not None or self.min_judge is not None

    def keeps(self, result: Any) -> bool:
        if self.where == "correct" and result.correct is not True:
            return False
        if self.where == "em" and result.em < 1.0:
            return False
        return not (self.min_judge is not None and (result.judge is None or result.judge < self.min_judge))


@dataclass
class SourceSummary:
    kind: Literal["trajectories", "eval results"] = "trajectories"
    rows: int = 0
    filtered_out: int = 0
    without_trajectory: int = 0
    #: eval results with a judge score, and with a judge error
    judged: int = 0
    judge_errors: int = 0
    trajectories: list[Trajectory] = field(default_factory=list)


def _is_eval_result(obj: dict[str, Any]) -> bool:
    return "golden_answers" in obj and "trajectory" in obj


def read_sft_source(path: str | os.PathLike[str], flt: ResultFilter | None = None) -> SourceSummary:
    """The trajectories to export from ``path`` (see the module docstring); a malformed line raises
    UserError naming file:line and field."""
    from agentrag.eval.result import EvalResult  # eval imports heavy modules; only needed here

    flt = flt or ResultFilter()
    out = SourceSummary()
    for lineno, obj in iter_json_objects(path):
        if out.rows == 0 and _is_eval_result(obj):
            out.kind = "eval results"
        out.rows += 1
        model: type[Any] = EvalResult if out.kind == "eval results" else Trajectory
        try:
            rec = model.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "record"
            raise UserError(f"{path}:{lineno}: {model.__name__} field {where!r}: {err['msg']}") from exc
        if out.kind == "trajectories":
            out.trajectories.append(rec)
            continue
        out.judged += rec.judge is not None
        out.judge_errors += bool(rec.judge_error)
        if rec.trajectory is None:
            out.without_trajectory += 1
        elif not flt.keeps(rec):
            out.filtered_out += 1
        else:
            out.trajectories.append(rec.trajectory)
    if flt.active and out.kind == "trajectories":
        raise UserError(f"{path}: --where/--min-judge filter eval results (an eval run's results.jsonl); this "
                        "file holds trajectories, which carry no verdict; drop the filter or export the eval "
                        "run's results.jsonl")
    if flt.min_judge is not None and out.rows and not out.judged:
        why = (f"its judge failed on all {out.judge_errors} of them (see judge_error)" if out.judge_errors
               else "the run had no judge")
        raise UserError(f"{path}: --min-judge {flt.min_judge} keeps results by their LLM-judge score, but none of the "
                        f"{out.rows} results has one ({why}); drop --min-judge (or use --where em), or rerun the "
                        "eval with --judge REF")
    return out


__all__ = ["ResultFilter", "SourceSummary", "read_sft_source"]
