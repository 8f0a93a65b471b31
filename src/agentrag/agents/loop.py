"""The shared agent loop machinery: one LLM turn, step recording, trajectory bookkeeping.

Each protocol (react, plan_step, reason_ground, search_r1) subclasses :class:`BaseAgent` and
writes its turn logic in ``_run``; ``run`` wraps it so token and time accounting are filled in the
same way for every protocol. Failures follow the one failure policy (``agentrag.errors.classify``):

- a request over the model's context window (:class:`~agentrag.errors.ContextLimitError`) is
  model-limited data: the trajectory ends with ``finish_reason="context_limit"`` (no answer, the
  steps so far kept, ``metadata["flagged"]``), and is scored as such, never retried;
- every other :class:`~agentrag.errors.LLMError` (an outage after the backend's retries, a
  non-retryable status), an :class:`~agentrag.errors.EndpointError`, and a retrieval outage
  raised by the retrieval tool propagate out of ``run``: the caller's policy decides (the item
  stays unfinished, or the run stops);
- model output the backend could not parse (a non-retryable ``ParseError``) is a turn with
  ``error`` set, handled by the protocol as a parse error.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from agentrag.agents.base import NavigationPolicy
from agentrag.agents.config import AgentConfig
from agentrag.agents.tools import RetrievalTool
from agentrag.errors import ContextLimitError, LLMError, ParseError
from agentrag.llm.base import LLM, Completion
from agentrag.llm.parsing import reasoning_of, split_think
from agentrag.protocol import parse_tool_calls, parse_turn
from agentrag.records import Message, QAItem, Step, Trajectory, Usage

logger = logging.getLogger(__name__)


def extract_tag(text: str, tag: str) -> str | None:
    """The content of ``<tag>...</tag>`` when ``text`` is a well-formed turn with that action
    (:func:`agentrag.protocol.parse_turn`: the first closed one; an unclosed, mis-cased or nested
    tag, or a second ``<tag>`` after the first, is a malformed turn and gives ``None``, as does a
    text without the tag)."""
    turn = parse_turn(text, actions=(tag,))
    return turn.content if turn.action == tag else None


def strip_tool_call_text(text: str) -> str:
    """The thought of a turn that calls tools: the text before its first ``<tool_call>`` block (the
    one tool-call parser, :func:`agentrag.protocol.parse_tool_calls`); a reply that is just a bare
    JSON call leaves no thought."""
    if "<tool_call>" in text:
        return text[: text.find("<tool_call>")].strip()
    rest = text.strip()
    if rest.startswith("{") and rest.endswith("}"):
        return "" if parse_tool_calls(rest).calls else rest
    return rest


#: protocols whose own output format uses ``<think>`` (the thought the protocol parses and feeds
#: back): their text keeps the tags; only a server's ``reasoning_content`` goes to ``reasoning``
THINK_PROTOCOLS = frozenset({"search_r1", "planner_executor"})


@dataclass
class Turn:
    """One LLM call: the completion (``None`` when the output could not be parsed), the parse
    error if any, and the wall-clock latency.

    ``text`` is what the protocol parses: the reply without a reasoning model's ``<think>`` blocks
    (unless ``keep_think``, for protocols whose format uses the tag); ``reasoning`` is the
    server's ``reasoning_content`` plus the removed think text, kept in the step's own field."""

    completion: Completion | None
    error: str | None
    latency: float
    keep_think: bool = False

    @property
    def _split(self) -> tuple[str, str | None]:
        full = (self.completion.text or "") if self.completion else ""
        if self.keep_think:
            return full, None
        rest, think = split_think(full)
        return rest or "", think

    @property
    def text(self) -> str:
        return self._split[0]

    @property
    def reasoning(self) -> str | None:
        api = reasoning_of(self.completion.raw) if self.completion else None
        parts = [p for p in (api, self._split[1]) if p]
        return "\n\n".join(parts) or None

    @property
    def usage(self) -> Usage:
        return self.completion.usage if self.completion else Usage(calls=1)


class BaseAgent:
    """An agent over an LLM and a navigation policy; ``run(item) -> Trajectory`` never raises for
    model misbehaviour (bad output, over the context window); outages and endpoint errors propagate."""

    name: ClassVar[str] = ""
    config_class: ClassVar[type[AgentConfig]] = AgentConfig

    def __init__(self, llm: LLM, navigation: NavigationPolicy, config: AgentConfig | None = None) -> None:
        self.llm = llm
        self.navigation = navigation
        self.config = config if config is not None else self.config_class()

    # -- to implement -------------------------------------------------------------------------
    def _run(self, item: QAItem, traj: Trajectory) -> None:
        """Fill ``traj`` (steps, answer, finish_reason, messages, metadata)."""
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------------
    def run(self, item: QAItem) -> Trajectory:
        """Run the protocol on one question."""
        traj = Trajectory(id=item.id, question=item.question, agent=self.name,
                          model=str(getattr(self.llm, "model", "")))
        start = time.perf_counter()
        try:
            self._run(item, traj)
        except ContextLimitError as exc:
            logger.warning("%s: %r is over the model's context window after %d steps: %s", self.name, item.id,
                           len(traj.steps), exc)
            traj.answer = None
            traj.finish_reason = "context_limit"
            traj.metadata["error"] = f"{type(exc).__name__}: {exc}"
            traj.metadata["flagged"] = "context_limit"
        traj.usage = sum((s.usage for s in traj.steps), Usage())
        traj.elapsed = time.perf_counter() - start
        return traj

    def new_tool(self, name: str, query_arg: str = "query", k_arg: str = "top_k", *,
                 traj: Trajectory | None = None, neutralize: bool = False) -> RetrievalTool:
        """A fresh retrieval tool (its step counter starts at 1) for one trajectory; with ``traj``
        the top-k of every retrieval it runs is recorded in ``traj.metadata["topk_per_step"]``
        (its length is the trajectory's retrieval step count)."""
        record: list[int] | None = None
        if traj is not None:
            record = traj.metadata.setdefault("topk_per_step", [])
        return RetrievalTool(self.navigation, name=name, default_k=self.config.top_k,
                             max_k=self.config.max_top_k, query_arg=query_arg, k_arg=k_arg,
                             neutralize=neutralize, topk_per_step=record, doc_chars=self.config.doc_chars)

    def sampling(self) -> dict[str, Any]:
        out: dict[str, Any] = {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if self.config.seed is not None:
            out["seed"] = self.config.seed
        return out

    def chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None, **extra: Any) -> Turn:
        """One LLM call. A non-retryable ParseError from the backend (model output it could not
        parse) becomes a turn with ``error`` set; an LLMError propagates (``run`` turns a
        ContextLimitError into finish_reason ``context_limit``; any other one leaves ``run``)."""
        t0 = time.perf_counter()
        try:
            out = self.llm.chat(messages, tools=tools, **self.sampling(), **extra)
        except ParseError as exc:
            if exc.is_retryable:  # not a valid completion: an outage, not model output
                raise
            return Turn(None, f"unparseable model output: {exc}", time.perf_counter() - t0)
        if not out:
            raise LLMError(f"{type(self.llm).__name__} returned no completion", is_retryable=True)
        return Turn(out[0], None, time.perf_counter() - t0, keep_think=self.name in THINK_PROTOCOLS)

    @staticmethod
    def step(turn: Turn, *, thought: str | None = None, **fields: Any) -> Step:
        """A step of ``turn``: its usage, latency, raw text and reasoning, plus the given fields."""
        raw = turn.completion.text if turn.completion else None
        fields.setdefault("reasoning", turn.reasoning)
        return Step(thought=turn.text if thought is None else thought, raw=raw, usage=turn.usage,
                    latency=turn.latency, **fields)


__all__ = ["THINK_PROTOCOLS", "BaseAgent", "Turn", "extract_tag", "strip_tool_call_text"]
