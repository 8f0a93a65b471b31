"""EviPath (paper 001): abductive reasoning paths for planner–executor RAG agents -> planner and
executor SFT conversations. See docs/evipath.md and :func:`run_evipath`."""

from agentrag.synth.evipath.config import EviPathConfig, EviPathRunConfig
from agentrag.synth.evipath.inputs import read_items
from agentrag.synth.evipath.pipeline import EviPathComponents, EviPathStages
from agentrag.synth.evipath.run import EviPathRecipe, EviPathSynth, run_evipath

__all__ = ["EviPathConfig", "EviPathRunConfig", "EviPathComponents", "EviPathSynth", "EviPathStages",
           "EviPathRecipe", "read_items", "run_evipath"]
