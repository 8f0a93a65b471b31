"""Reports: Markdown + HTML with tables and inline SVG charts (no plotting dependency), and the
run viewer (``agentrag view``)."""

from agentrag.render import Section, bar_chart_svg, grouped_bar_chart_svg, write_report
from agentrag.report.eval_report import eval_sections, write_eval_report
from agentrag.report.viewer import build_payload, detect_run_kind, make_server, write_viewer

__all__ = ["Section", "write_report", "bar_chart_svg", "grouped_bar_chart_svg", "eval_sections", "write_eval_report",
           "write_viewer", "build_payload", "detect_run_kind", "RUN_KINDS", "make_server"]


def __getattr__(name: str) -> object:
    if name == "RUN_KINDS":  # the registered synthesizers' kinds: read on use, not at import
        from agentrag.report.viewer.detect import signatures

        return tuple(signatures())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
