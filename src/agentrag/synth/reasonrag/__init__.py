"""ReasonRAG (paper 002): MCTS over the reason_ground agent's steps with Shortest Path Reward
Estimation (Eq. 1) or judge values (Eq. 6), process-level preference pairs (RAG-ProGuide) for DPO,
and the dataset statistics. See docs/reasonrag.md."""

from agentrag.synth.reasonrag.config import ReasonRagConfig, ReasonRagRunConfig
from agentrag.synth.reasonrag.mcts import QuestionSearch
from agentrag.synth.reasonrag.pairs import extract_pairs
from agentrag.synth.reasonrag.pipeline import ReasonRagComponents
from agentrag.synth.reasonrag.run import ReasonRagSynth, run_reasonrag
from agentrag.synth.reasonrag.tree import Estimate, IterationEvent, SearchTree, TreeNode, q_value

__all__ = ["ReasonRagConfig", "ReasonRagRunConfig", "run_reasonrag", "ReasonRagSynth",
           "QuestionSearch", "extract_pairs", "ReasonRagComponents", "Estimate", "IterationEvent",
           "SearchTree", "TreeNode", "q_value"]
