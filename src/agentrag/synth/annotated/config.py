"""Settings of ``agentrag synth annotated`` (``--config x.yaml --set key=value``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentrag.config import Config


class AnnotatedRunConfig(Config):
    """The human-annotation teacher: which training files, which KB, how the agent searches."""

    datasets: list[str] = Field(default_factory=list, description="raw MuSiQue / 2WikiMultihopQA TRAINING files "
                                "(their decompositions / evidence triples are the teacher)")
    kb: str | None = Field(None, description="KB directory (or retrieval server URL) built from the training "
                           "contexts; every hop is searched there")
    protocol: Literal["react"] = Field("react", description="the agent protocol the trajectories are written for")
    limit: int | None = Field(None, ge=1, description="read at most this many records per file")
    top_k: int = Field(5, ge=1, description="documents per search (the react agent's default top_k)")
    max_top_k: int | None = Field(20, ge=1, description="the react agent's max_top_k (only the tool schema)")
    max_hops: int = Field(4, ge=1, description="decompositions with more hops are dropped (reason 'hops')")
    thoughts: bool = Field(True, description="write a short thought before each search after the first, "
                           "stating the previous hop's annotated answer")
    system_prompt: str | None = Field(None, description="the react system prompt the paths are written with "
                                      "('{tool}' becomes the tool name; None: the react agent's default); "
                                      "evaluate with the same agent_config.system_prompt")
    doc_chars: int | None = Field(None, ge=20, description="cut each document to this many characters, as the "
                                  "agent's doc_chars does (None: whole documents)")
    forced_share: float = Field(0.0, ge=0.0, le=1.0, description="share of kept paths (chosen by a hash of the "
                                "item id) written with the react agent's forced answer turn: the last search, "
                                "then the user message 'You have no searches left...', then the answer, with no "
                                "tool schema (as the agent's last turn is sent)")
    planner_executor: bool = Field(True, description="also write EviPath planner_executor conversations of the "
                                   "kept paths (planner chats and one executor chat per hop) into "
                                   "sft_planner_executor/")
    reason_ground: bool = Field(True, description="also write ReasonRAG reason_ground SFT records of the kept paths "
                                "(one chat per round: query, evidence, answer) into sft_reason_ground/: an SFT "
                                "policy for the reason_ground agent and the ReasonRAG MCTS")
    concurrency: int = Field(1, ge=1, description="items searched at once")


__all__ = ["AnnotatedRunConfig"]
