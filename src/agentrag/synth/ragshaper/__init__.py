"""RAGShaper (paper 000): InfoCurator information trees with adversarial distractors, Eq. 5 path
selection, QA synthesis, behavior elicitation under constrained navigation, F1 filtering, SFT
export and the run analyses. See docs/ragshaper.md."""

from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import DISTRACTOR_TYPES, RagShaperConfig, RagShaperRunConfig
from agentrag.synth.ragshaper.paths import path_score, select_paths
from agentrag.synth.ragshaper.pipeline import RagShaperPipeline
from agentrag.synth.ragshaper.run import RagShaperSynth, run_ragshaper
from agentrag.synth.ragshaper.tree import InfoCurator

__all__ = ["RagShaperConfig", "DISTRACTOR_TYPES", "InfoCurator", "select_paths", "path_score",
           "RagShaperPipeline", "RagShaperComponents", "RagShaperRunConfig", "RagShaperSynth", "run_ragshaper"]
