"""Evaluation: dataset loaders, answer metrics, the LLM judge, hop-aware diagnosis and the runner."""

from agentrag.eval.datasets import load_dataset
from agentrag.eval.hops import diagnose
from agentrag.eval.judge import JudgeVerdict, LLMJudge
from agentrag.eval.metrics import acc, em, f1, normalize_answer, passage_recall
from agentrag.eval.result import EvalResult
from agentrag.eval.runner import EvalConfig, evaluate, score_item, summarize

# em/f1/acc stay importable from here but are exported at the top level only via agentrag.eval.metrics.
__all__ = ["load_dataset", "diagnose", "LLMJudge", "JudgeVerdict", "normalize_answer", "EvalResult", "EvalConfig",
           "evaluate", "score_item", "summarize"]
