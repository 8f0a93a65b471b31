"""Typed configs of the agents (one home per default)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from agentrag.config import Config


class AgentConfig(Config):
    """Settings every agent shares."""

    #: settings the CPU budgets of ``--llm embedded`` (agentrag.eval.defaults) leave at this class's
    #: defaults: an agent whose synthesized training data is made for them names them
    keep_on_cpu: ClassVar[frozenset[str]] = frozenset()

    max_steps: int = Field(default=8, ge=1, description="most model turns (each a tool call, an answer or a malformed reply)")
    top_k: int = Field(default=5, ge=1, description="documents per search when the model does not say")
    max_top_k: int | None = Field(default=20, ge=1, description="upper bound on a top_k the model asks for "
                                  "(a larger request is capped and the observation says so); None: no cap, "
                                  "the knowledge base serves what it can")
    threshold: float | None = Field(default=None, description="keep hits scoring above this (RAGShaper Eq. 4)")
    doc_chars: int | None = Field(default=None, ge=20, description="cut each document the model sees to this many "
                                  "characters (None: whole documents); a compact protocol for small context windows")
    temperature: float = Field(default=0.0, ge=0.0)
    max_tokens: int = Field(default=512, ge=1, description="completion budget per LLM call")
    seed: int | None = None
    max_format_errors: int = Field(default=3, ge=1, description="consecutive malformed turns before giving up "
                                   "with finish_reason 'parse_error'")


class ReactConfig(AgentConfig):
    """Function calling with one dense-search tool; the answer comes inside <answer> tags."""

    tool_name: str = "dense_search"
    system_prompt: str | None = Field(
        default=None, description="replaces the default system prompt; '{tool}' in it becomes the tool name "
        "(e.g. RAGShaper's rollout prompt, agentrag.agents.rollout)")
    untagged_answer: Literal["no_answer", "reject"] = Field(
        "no_answer", description="a text reply with no tool call and no <answer> tags: 'no_answer' ends "
        "the run with finish_reason 'no_answer' (a turn without tool calls ends the run, but its text is "
        "never the prediction: it may be a copied document); 'reject' tells the model to use the tags "
        "and goes on")
    force_answer: bool = Field(
        default=True, description="make the last of max_steps turns (when max_steps >= 2) an answer turn: "
        "no tools offered and the model told to answer now; False leaves every turn free to search")
    forced_answer_format: Literal["tags", "json"] = Field(
        default="tags", description="how the forced answer turn asks for the answer: 'tags' (<answer> in "
        "text) or 'json' (response_format {\"answer\": str}; makes small models on the embedded backend, "
        "which imitate earlier JSON tool calls, produce an answer)")


class PlanStepConfig(AgentConfig):
    """AgenticRAGTracer's plan-then-step protocol."""

    max_steps: int = Field(default=10, ge=1, description="most RAG_search steps; the run ends right after "
                           "the last one (Tracer's evaluation)")
    max_turns_without_tool: int = Field(default=5, ge=1, description="consecutive step turns with no tool call "
                                        "before giving up")
    top_k: int = Field(default=5, ge=1, description="topk of RAG_search when the model leaves it out "
                       "(the schema requires it)")
    max_top_k: int | None = Field(default=None, ge=1, description="cap on the topk the model asks for; None "
                                  "(default): no cap, the KB serves what it can (Tracer Fig. 3 studies the "
                                  "model's own choice)")


class ReasonGroundConfig(AgentConfig):
    """ReasonRAG Algorithm 1: N rounds of Reasoning / Grounding (+ an optional forced answer)."""

    max_steps: int = Field(default=10, ge=1, description="N, the most LLM rounds (reasoning and grounding)")
    top_k: int = Field(default=3, ge=1)
    forced_answer: bool = Field(
        default=True, description="after N rounds without an answer, run a pending Grounding step and then "
        "one extra Reasoning round that must answer (not in the paper: Algorithm 1 returns y unanswered)")


class SearchR1Config(AgentConfig):
    """Search-R1 tags in one assistant stream."""

    max_steps: int = Field(default=6, ge=1, description="most generation turns")
    top_k: int = Field(default=3, ge=1)
    prompt_template: str | None = Field(
        default=None, description="the user prompt: None for agentrag's own wording of the protocol, or a text file "
        "holding the prompt with {question} where the question goes, e.g. the template a Search-R1 checkpoint was "
        "trained with (docs/agents.md says how to write it), so that checkpoint's scores are comparable")

    @field_validator("prompt_template")
    @classmethod
    def _template_file(cls, value: str | None) -> str | None:
        if value is not None:
            from agentrag.agents.prompts import read_prompt_template

            read_prompt_template(value)
        return value


# -- the papers' non-agentic baselines (ReasonRAG Table 2, RAGShaper §5), with the defaults of
#    FlashRAG's reproductions (docs/agents.md cites each source) ---------------------------------
class NaiveConfig(AgentConfig):
    """Closed-book generation: one LLM call, no retrieval (``max_steps`` and ``top_k`` are unused)."""

    max_tokens: int = Field(default=32, ge=1, description="completion budget (FlashRAG's generation "
                            "max_tokens 32: a short answer)")


class StandardRagConfig(AgentConfig):
    """Retrieve top-k with the question, answer in one LLM call (``max_steps`` is unused)."""

    top_k: int = Field(default=5, ge=1, description="documents retrieved with the question (FlashRAG retrieval_topk 5)")
    max_tokens: int = Field(default=32, ge=1, description="completion budget (FlashRAG's generation max_tokens 32)")


class IrcotConfig(AgentConfig):
    """IRCoT: one chain-of-thought sentence, one retrieval with it, until "answer is" or ``max_iter``."""

    top_k: int = Field(default=5, ge=1, description="documents per retrieval, the question's and each "
                       "sentence's (FlashRAG retrieval_topk 5)")
    max_iter: int = Field(default=5, ge=1, description="most reasoning sentences (LLM calls); FlashRAG's IRCoT "
                          "run uses max_iter=5")
    max_paragraphs: int = Field(default=15, ge=1, description="cap on the paragraphs accumulated over the "
                                "retrievals (IRCoT paper: 15); later new paragraphs are dropped")
    max_tokens: int = Field(default=32, ge=1, description="completion budget per sentence (FlashRAG's "
                            "generation max_tokens 32; only the first sentence of the output is kept)")


class IterRetGenConfig(AgentConfig):
    """Iter-RetGen: ``iterations`` rounds of retrieve (question + previous generation), generate."""

    top_k: int = Field(default=5, ge=1, description="documents per round (FlashRAG retrieval_topk 5)")
    iterations: int = Field(default=3, ge=1, description="retrieval-generation rounds (FlashRAG iter_num 3)")
    max_tokens: int = Field(default=32, ge=1, description="completion budget per round (FlashRAG's generation "
                            "max_tokens 32)")


__all__ = ["AgentConfig", "ReactConfig", "PlanStepConfig", "ReasonGroundConfig", "SearchR1Config",
           "NaiveConfig", "StandardRagConfig", "IrcotConfig", "IterRetGenConfig"]
