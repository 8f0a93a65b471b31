"""``planner_executor``: EviPath's RAG agent (§3.1, Eq. 1).

The planner (system prompt I_p) writes ``<think>`` and either ``<action>Search("…")…</action>``
or ``<answer>``. Each Search is one retrieval step: the executor retrieves ``top_k`` passages
from the KB and, with prompt I_e, writes ``<think>`` ``<select>`` ``<answer>``; its answer
sentences come back to the planner as one ``Observation`` turn. One LLM plays both roles, or a
second one (``executor_llm``, a reference like ``--llm``) plays the executor (Table 5).

Limits: ``max_steps`` planner turns; the last one is told to answer now. ``max_searches`` caps
the retrievals of one question; a search over it is not run and its observation line says so.
The Searches of one planner turn retrieve in order, then their executor calls run concurrently.
The executor sees each passage whole (as in EviPath's training data) unless ``max_passage_chars``.
The top-k of every retrieval is in ``trajectory.metadata["topk_per_step"]``. Malformed planner turns get a reminder and count toward
``max_format_errors`` in a row (``parse_error``). Trajectory steps: one per retrieval (thought
= the planner's thought, action = ``Search``, observation = the executor's answer, hits =
the retrieved passages, executor output in ``raw``) plus the planner's answer step, so
``agentrag eval`` counts steps per retrieval.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from pydantic import Field

from agentrag.agents.base import NavigationPolicy
from agentrag.agents.config import AgentConfig
from agentrag.agents.loop import BaseAgent
from agentrag.agents.pe_protocol import (
    EXECUTOR_SYSTEM,
    NO_INFORMATION,
    PLANNER_SYSTEM,
    executor_user,
    parse_executor,
    parse_planner,
    render_observation,
)
from agentrag.llm.base import LLM
from agentrag.records import Hit, Message, QAItem, Step, ToolCall, Trajectory, Usage

SEARCH = "Search"
FORCE = "You have used your search budget. Give the final answer now: <think>…</think> <answer>…</answer>."
REMIND = ("Please follow the format: <think>…</think> then <action>Search(\"question?\")</action> or "
          "<answer>short answer</answer>.")


def passage_text(hit: Hit, max_chars: int | None = None) -> str:
    """A retrieved passage as the executor sees it: ``title: text`` (the form of EviPath's F),
    the text cut at ``max_chars`` when given."""
    return (f"{hit.title}: " if hit.title else "") + (hit.text if max_chars is None else hit.text[:max_chars])


def over_budget(question: str, budget: int) -> str:
    """The observation line of a Search that was not run (the budget is used up)."""
    return f"Not searched (the budget of {budget} searches is used up): {question}"


class PlannerExecutorConfig(AgentConfig):
    """EviPath's planner–executor agent. EviPath's synthesizer makes its data for these defaults
    (a kept path fits ``max_steps`` and ``max_searches``; its executor records show ``top_k``
    passages cut at ``max_passage_chars``), so ``--llm embedded`` keeps them (docs/evipath.md)."""

    keep_on_cpu: ClassVar[frozenset[str]] = frozenset({"max_steps", "max_searches", "top_k", "max_passage_chars"})

    max_steps: int = Field(default=6, ge=1, description="most planner turns (the last is told to answer)")
    max_searches: int = Field(default=8, ge=1, description="most Search calls (retrievals) per question")
    top_k: int = Field(default=5, ge=1, description="passages the executor retrieves per sub-question")
    executor_llm: str | None = Field(default=None, description="LLM reference for the executor role "
                                     "(default: the planner's LLM)")
    executor_max_tokens: int = Field(default=256, ge=1, description="completion budget of one executor call")
    max_passage_chars: int | None = Field(default=None, ge=50, description="cut each passage the executor sees "
                                          "(None: whole, as in the EviPath training data)")


class PlannerExecutorAgent(BaseAgent):
    """Planner turns with parallel Search actions; an executor LLM answers each sub-question."""

    name = "planner_executor"
    config_class = PlannerExecutorConfig
    config: PlannerExecutorConfig

    def __init__(self, llm: LLM, navigation: NavigationPolicy, config: AgentConfig | None = None,
                 executor_llm: LLM | None = None) -> None:
        super().__init__(llm, navigation, config)
        if executor_llm is None and self.config.executor_llm:
            from agentrag.llm import resolve_llm

            executor_llm = resolve_llm(self.config.executor_llm)
        self.executor_llm: LLM = executor_llm or llm

    def execute(self, question: str, tool: Any) -> Step:
        """One Search: retrieve, then the executor's think/select/answer (the observation)."""
        step, texts = self.retrieve(question, tool)
        return self.answer(question, step, texts)

    def retrieve(self, question: str, tool: Any) -> tuple[Step, list[str]]:
        """The retrieval half of a Search: the step (hits, or an error) and the passages as shown."""
        t0 = time.perf_counter()
        result = tool.search(question, self.config.top_k)
        action = ToolCall(id="", name=SEARCH, arguments={"query": question})
        step = Step(action=action, observation=NO_INFORMATION, hits=result.hits, error=result.error,
                    latency=time.perf_counter() - t0)
        if result.error or not result.hits:
            return step, []
        return step, [passage_text(h, self.config.max_passage_chars) for h in result.hits]

    def answer(self, question: str, step: Step, texts: list[str]) -> Step:
        """The executor half: think/select/answer over the retrieved passages (none: no call)."""
        if not texts:
            return step
        t0 = time.perf_counter()
        messages = [Message(role="system", content=EXECUTOR_SYSTEM),
                    Message(role="user", content=executor_user(question, texts))]
        sampling = {**self.sampling(), "max_tokens": self.config.executor_max_tokens}
        out = self.executor_llm.chat(messages, **sampling)
        text = (out[0].text or "") if out else ""
        parsed = parse_executor(text)
        return step.model_copy(update={
            "observation": parsed.answer or NO_INFORMATION, "raw": text, "error": parsed.error,
            "usage": out[0].usage if out else Usage(calls=1), "latency": step.latency + time.perf_counter() - t0})

    def search_all(self, questions: list[str], tool: Any) -> list[Step]:
        """The Searches of one planner turn: retrievals in order (the tool counts steps), then
        the executor calls concurrently."""
        retrieved = [self.retrieve(q, tool) for q in questions]
        if len(questions) == 1:
            return [self.answer(questions[0], *retrieved[0])]
        with ThreadPoolExecutor(max_workers=len(questions)) as pool:
            return list(pool.map(lambda qr: self.answer(qr[0], *qr[1]), zip(questions, retrieved, strict=True)))

    def _run(self, item: QAItem, traj: Trajectory) -> None:
        cfg = self.config
        tool = self.new_tool(SEARCH, traj=traj)
        messages = [Message(role="system", content=PLANNER_SYSTEM),
                    Message(role="user", content=f"Question: {item.question}")]
        traj.messages = messages
        if cfg.max_passage_chars is not None:  # the evidence the executor saw (the SFT export rebuilds it)
            traj.metadata["max_passage_chars"] = cfg.max_passage_chars
        searches = errors = 0
        for turn_no in range(cfg.max_steps):
            last = turn_no == cfg.max_steps - 1 or searches >= cfg.max_searches
            if last and turn_no > 0:
                messages[-1] = messages[-1].model_copy(update={"content": f"{messages[-1].content}\n\n{FORCE}"})
            turn = self.chat(messages)
            parsed = parse_planner(turn.text) if turn.error is None else None
            if parsed is None or parsed.error:
                traj.steps.append(self.step(turn, error=turn.error or (parsed.error if parsed else None)))
                errors += 1
                messages += [Message(role="assistant", content=turn.text), Message(role="user", content=REMIND)]
                if errors >= cfg.max_format_errors or last:
                    traj.finish_reason = "parse_error" if errors >= cfg.max_format_errors else "max_steps"
                    return
                continue
            errors = 0
            messages.append(Message(role="assistant", content=turn.text))
            if parsed.answer is not None and not parsed.searches:
                traj.steps.append(self.step(turn, thought=parsed.thought))
                traj.answer = parsed.answer or None
                traj.finish_reason = "answered" if parsed.answer else "no_answer"
                return
            if last:
                traj.steps.append(self.step(turn, thought=parsed.thought, error="searched past the budget"))
                traj.finish_reason = "max_steps"
                return
            allowed = parsed.searches[:cfg.max_searches - searches]
            answers = []
            for j, step in enumerate(self.search_all(allowed, tool)):
                searches += 1
                step.action = step.action.model_copy(update={"id": f"call_{len(traj.steps)}"}) if step.action else None
                step.thought = parsed.thought if j == 0 else ""
                if j == 0:  # the planner call's cost and latency go on its first search step
                    step.usage = step.usage + turn.usage
                    step.latency += turn.latency
                traj.steps.append(step)
                answers.append(step.observation or NO_INFORMATION)
            answers += [over_budget(q, cfg.max_searches) for q in parsed.searches[len(allowed):]]
            messages.append(Message(role="user", content=render_observation(answers)))
        traj.finish_reason = "max_steps"


__all__ = ["PlannerExecutorAgent", "PlannerExecutorConfig", "SEARCH", "passage_text", "over_budget"]
