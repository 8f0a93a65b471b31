"""Evaluation: dataset loaders, answer metrics, the LLM judge, hop-aware diagnosis, the runner and
``run_eval`` (everything ``agentrag eval`` does, as one call); ``run_suite`` (agents x datasets, the
papers' results table)."""

from agentrag.eval.datasets import load_dataset
from agentrag.eval.hops import diagnose
from agentrag.eval.judge import JudgeVerdict, LLMJudge
from agentrag.eval.metrics import normalize_answer
from agentrag.eval.result import EvalResult
from agentrag.eval.run import EvalBugs, run_eval
from agentrag.eval.runner import EvalConfig, evaluate, score_item, summarize
from agentrag.eval.suite import SuiteConfig, run_suite

# the metric functions live in agentrag.eval.metrics (em, f1, acc, passage_recall).
__all__ = ["load_dataset", "diagnose", "LLMJudge", "JudgeVerdict", "normalize_answer", "EvalResult", "EvalConfig",
           "evaluate", "score_item", "summarize", "run_eval", "EvalBugs", "SuiteConfig", "run_suite"]
