"""Reports: Markdown + HTML with tables and inline SVG charts (no plotting dependency)."""

from agentrag.report.eval_report import eval_sections, write_eval_report
from agentrag.report.render import Section, bar_chart_svg, write_report

__all__ = ["Section", "write_report", "bar_chart_svg", "eval_sections", "write_eval_report"]
