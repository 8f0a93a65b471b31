"""The human-annotation teacher: MuSiQue decompositions and 2WikiMultihopQA evidence triples
searched in a real KB become ``react`` SFT trajectories, with no LLM call."""

from agentrag.synth.annotated.config import AnnotatedRunConfig
from agentrag.synth.annotated.run import AnnotatedSynth, run_annotated

__all__ = ["AnnotatedRunConfig", "AnnotatedSynth", "run_annotated"]
