"""EviPath (paper 001): abductive reasoning paths for planner–executor RAG agents -> planner and
executor SFT conversations. See docs/evipath.md and :func:`run_evipath`."""

from agentrag.synth.evipath.config import EviPathConfig, EviPathRunConfig
from agentrag.synth.evipath.inputs import read_items
from agentrag.synth.evipath.pipeline import EviPathComponents
from agentrag.synth.evipath.pipeline import EviPathStages as EviPathStages
from agentrag.synth.evipath.run import EviPathBuilder as EviPathBuilder
from agentrag.synth.evipath.run import EviPathSynth, run_evipath

#: the former name of the pipeline, now the synthesizer declaration run by the driver
EviPathPipeline = EviPathSynth

# (EviPathSynth, EviPathStages, EviPathBuilder are importable from here too; the package-level
# export list, agentrag._EXPORTS, still names EviPathPipeline)
__all__ = ["EviPathConfig", "EviPathRunConfig", "EviPathComponents", "EviPathPipeline", "read_items", "run_evipath"]
