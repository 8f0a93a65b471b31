"""Evaluation: dataset loaders, answer metrics, the LLM judge, hop-aware diagnosis and the runner."""

from agentrag.eval.datasets import load_dataset
from agentrag.eval.hops import diagnose
from agentrag.eval.judge import JudgeVerdict, LLMJudge
from agentrag.eval.metrics import acc, em, f1, normalize_answer, passage_recall
from agentrag.eval.result import EvalResult
from agentrag.eval.runner import EvalConfig, evaluate, score_item, summarize

__all__ = ["load_dataset", "diagnose", "LLMJudge", "JudgeVerdict", "em", "f1", "acc", "normalize_answer",
           "passage_recall", "EvalResult", "EvalConfig", "evaluate", "score_item", "summarize"]
