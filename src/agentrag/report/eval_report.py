"""The evaluation report (its home is :mod:`agentrag.eval.report`, below the report layer)."""

from agentrag.eval.report import eval_sections, write_eval_report

__all__ = ["eval_sections", "write_eval_report"]
