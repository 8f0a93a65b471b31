"""The run viewer (``agentrag view``): one self-contained HTML page per run directory — eval runs
and the runs of every synthesizer — or the same page served on 127.0.0.1 for large runs."""

from agentrag.report.viewer.build import build_payload, write_viewer
from agentrag.report.viewer.detect import detect_run_kind, signatures
from agentrag.report.viewer.serve import make_server

__all__ = ["write_viewer", "build_payload", "detect_run_kind", "signatures", "RUN_KINDS", "make_server"]

def __getattr__(name: str) -> object:
    if name == "RUN_KINDS":  # the registered synthesizers' kinds: read on use, not at import
        from agentrag.report.viewer.detect import signatures

        return tuple(signatures())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

