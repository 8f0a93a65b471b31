"""AgenticRAGTracer builder: verified hop-aware benchmarks from atomic questions (see docs/tracer.md)."""

from agentrag.synth.tracer.config import TracerConfig, TracerRunConfig
from agentrag.synth.tracer.export import audit_exports, export_benchmark
from agentrag.synth.tracer.pipeline import TracerComponents
from agentrag.synth.tracer.review import (
           apply_review,
           fleiss_kappa,
           read_label_file,
           read_labels,
           write_review_sheet,
)
from agentrag.synth.tracer.run import TracerSynth, run_tracer

__all__ = ["TracerConfig", "TracerRunConfig", "TracerSynth", "TracerComponents", "export_benchmark",
           "audit_exports", "fleiss_kappa", "read_labels", "read_label_file", "apply_review", "write_review_sheet",
           "run_tracer"]
