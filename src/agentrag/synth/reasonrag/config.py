"""Configuration of the ReasonRAG synthesizer (paper / released-code values in the descriptions;
the defaults are demo-sized for the embedded model, see docs/reasonrag.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agentrag.config import Config
from agentrag.llm.adaptive import ITEMS_IN_FLIGHT_HELP, default_items_in_flight


class MCTSConfig(Config):
    """The tree search of §2.2.2 and Appendix A."""

    iterations: int = Field(default=6, ge=1, description="MCTS iterations per question (one expansion each)")
    c_uct: float = Field(default=1.414, ge=0.0, description="c_uct of Eq. 5 (released code: 1.414)")
    max_children: int = Field(default=2, ge=1, description="samples per node (released code: 2-3)")
    max_iter: int = Field(default=4, ge=1, description="reasoning rounds of a trajectory; the last round "
                          "forces an answer (agent max_steps; released code: 7-8)")
    top_k: int = Field(default=3, ge=1, description="documents per query (paper E.1: top 3)")
    doc_chars: int | None = Field(default=None, ge=20, description="cut each retrieved document to this many "
                                  "characters, as the reason_ground agent's doc_chars does (None: whole documents; "
                                  "set it to the value an SFT policy was trained and is evaluated with)")
    temperature: float = Field(default=0.8, gt=0.0, description="sampling temperature of expansions")
    max_tokens: int = Field(default=192, ge=16)
    accept_untagged_answer: bool = Field(default=False, description="take a forced round's untagged output as "
                                         "its answer (for small models that ignore the tags; the agent does not)")


class ValueConfig(Config):
    """Node values: SPRE rollouts (Eq. 1) or the LLM judge (Eq. 6)."""

    kind: Literal["spre", "judge"] = "spre"
    rollouts: int = Field(default=1, ge=1, description="k of Eq. 1 (released code: 64)")
    alpha: float = Field(default=0.9, gt=0.0, le=1.0, description="the decay factor alpha of Eq. 1, one for "
                         "search and pair labels as in the paper (which gives no value; 0.9 is the released "
                         "code's label value)")
    alpha_search: float | None = Field(default=None, gt=0.0, le=1.0, description="alpha during search only "
                                       "(default: alpha; the released code's split uses 0.95)")
    alpha_label: float | None = Field(default=None, gt=0.0, le=1.0, description="alpha of the pair labels only "
                                      "(default: alpha; the released code's split uses 0.9)")
    rollout_temperature: float = Field(default=0.8, gt=0.0)
    judge_max_tokens: int = Field(default=192, ge=16)

    @model_validator(mode="after")
    def _one_alpha(self) -> ValueConfig:
        """Unset split alphas take ``alpha`` (so the resolved config shows the values used)."""
        if self.alpha_search is None:
            self.alpha_search = self.alpha
        if self.alpha_label is None:
            self.alpha_label = self.alpha
        return self

    @property
    def search_alpha(self) -> float:
        """alpha of Eq. 1 while searching (Eq. 5's Q)."""
        return self.alpha if self.alpha_search is None else self.alpha_search

    @property
    def label_alpha(self) -> float:
        """alpha of Eq. 1 for the pair labels."""
        return self.alpha if self.alpha_label is None else self.alpha_label


class PairConfig(Config):
    """Preference-pair construction and filters (§2.2.3)."""

    min_gap: float = Field(default=0.01, ge=0.0, description="keep pairs with |dQ| >= this (paper: 0.01)")
    include_untagged: bool = Field(default=False, description="also pair untagged outputs (action 'none': "
                                   "Algorithm 1 keeps them in y and leaves the stage unchanged)")


class ReasonRagConfig(Config):
    """Everything ``agentrag synth reasonrag`` reads; override any key with ``--set``."""

    seed: int = 0
    concurrency: int | None = Field(default=None, ge=1, description=ITEMS_IN_FLIGHT_HELP)
    mcts: MCTSConfig = Field(default_factory=MCTSConfig)
    value: ValueConfig = Field(default_factory=ValueConfig)
    pairs: PairConfig = Field(default_factory=PairConfig)
    greedy_baseline: bool = Field(default=True, description="run the greedy reason_ground agent per question "
                                  "for the report (best leaf vs greedy answer)")
    export: bool = True


class ReasonRagRunConfig(ReasonRagConfig):
    """The synthesizer settings plus what the command line names."""

    dataset: list[str] = Field(default_factory=list)
    kb: str | None = None
    llm: str = "embedded"
    judge: str | None = None
    limit: int | None = Field(default=None, ge=1)

    def items_in_flight(self) -> int:
        """``concurrency``, or its default for the LLMs named (:func:`~agentrag.llm.adaptive.default_items_in_flight`)."""
        return self.concurrency or default_items_in_flight(self.llm, self.judge)


__all__ = ["MCTSConfig", "ValueConfig", "PairConfig", "ReasonRagConfig", "ReasonRagRunConfig"]
