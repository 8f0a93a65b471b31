"""The deductive baseline (RQ7, Table 4): the ``planner_executor`` agent answers the training
question on the KB without the gold answer or evidence; its trajectory becomes the same records
(plan, iterations, sub-answers, selections) and goes through the same gates and exports.

For the ``select ⊆ F̂_i`` gate, F̂_i is computed by Eq. 6 over the retrieved passages that hold
gold evidence (a passage holds a gold fact when the fact's words occur in it in order, :data:`HOLDS`); a sub-question
whose retrieval found no gold evidence fails that gate.
"""

from __future__ import annotations

from collections.abc import Callable

from agentrag.agents.pe_protocol import parse_executor, parse_planner
from agentrag.agents.planner_executor import PlannerExecutorAgent, passage_text
from agentrag.kb.base import Embedder, Retriever
from agentrag.llm.base import LLM
from agentrag.match import containment
from agentrag.records import Provenance, QAItem, Trajectory
from agentrag.synth.evipath.answering import select_evidence
from agentrag.synth.evipath.config import EviPathConfig
from agentrag.synth.evipath.schema import (
    EviItem,
    IterationRecord,
    PlanRecord,
    SelectionRecord,
    SubAnswerRecord,
)

#: share of a gold fact's words (its first 200 characters), in order, that a retrieved passage must
#: hold to hold that fact (a passage cut at ``max_passage_chars`` may end inside it)
HOLDS = 0.95


def run_agent(agent: PlannerExecutorAgent, item: EviItem) -> Trajectory:
    return agent.run(QAItem(id=item.id, question=item.question, golden_answers=item.answers, hops=item.hops))


def agent_path(cfg: EviPathConfig, planner: LLM, executor: LLM, retriever: Retriever, phi: Callable[[], Embedder],
               item: EviItem) -> tuple[PlanRecord, list[IterationRecord], list[SubAnswerRecord], list[SelectionRecord]]:
    """One deductive path: the agent on the KB, its trajectory split into the stage records. LLM
    errors propagate out of the agent (the failure policy decides); a request over the context
    window ends the trajectory with ``finish_reason="context_limit"``: a flagged path."""
    from agentrag.agents.navigation import PlainNavigation
    from agentrag.agents.planner_executor import PlannerExecutorConfig

    acfg = PlannerExecutorConfig(top_k=cfg.agent_top_k, max_steps=cfg.agent_max_steps,
                                 max_tokens=cfg.planner.max_tokens, temperature=cfg.planner.temperature,
                                 executor_max_tokens=cfg.executor.max_tokens)
    agent = PlannerExecutorAgent(planner, PlainNavigation(retriever), acfg, executor_llm=executor)
    traj = run_agent(agent, item)
    plan, iterations, subs, sels = trajectory_records(item, traj, phi(), cfg, acfg.max_passage_chars)
    if traj.finish_reason == "context_limit":  # over the context window: a flagged path with that reason
        why = traj.metadata.get("error", "over the model's context window")
        iterations[-1] = iterations[-1].model_copy(update={"status": "failed", "reason": f"context_limit: {why}"})
    return plan, iterations, subs, sels


def trajectory_records(item: EviItem, traj: Trajectory, embedder: Embedder, cfg: EviPathConfig,
                       max_passage_chars: int | None) -> tuple[PlanRecord, list[IterationRecord], list[SubAnswerRecord],
                                                        list[SelectionRecord]]:
    """Split an agent trajectory into the stage records of the abductive pipeline."""
    model = traj.model
    plan = PlanRecord(id=item.id, plan=[], provenance=Provenance(stage="plans", model=f"deductive:{model}"))
    searches = [s for s in traj.steps if s.action is not None]
    turns = [m for m in traj.messages if m.role == "assistant"]
    iterations: list[IterationRecord] = []
    subs: list[SubAnswerRecord] = []
    sels: list[SelectionRecord] = []
    cursor = 0
    for n, msg in enumerate(turns, start=1):
        parsed = parse_planner(msg.content or "")
        rec = IterationRecord(id=f"{item.id}-i{n}", item_id=item.id, n=n, thought=parsed.thought, answer=parsed.answer,
                              provenance=Provenance(stage="iterations", model=model, raw_output=msg.content))
        if parsed.error:
            rec = rec.model_copy(update={"status": "failed", "reason": f"parse_error: {parsed.error}"})
        for j, step in enumerate(searches[cursor:cursor + len(parsed.searches)], start=1):
            q = str(step.action.arguments.get("query", "")) if step.action else ""
            sid = f"{item.id}-i{n}-q{j}"
            context = [passage_text(h, max_passage_chars) for h in step.hits]
            ex = parse_executor(step.raw or "")
            subs.append(SubAnswerRecord(id=sid, item_id=item.id, iteration=n, question=q, answer=step.observation or "",
                                        context=context, executor_output=step.raw,
                                        status="failed" if step.error else "ok", reason=step.error,
                                        provenance=Provenance(stage="sub_answers", model=model, raw_output=step.raw)))
            rec.actions.append(q)
            rec.observations.append(step.observation or "")
            sels.append(_selection(item, sid, q, ex.answer or "", context, ex.thought, ex.select, embedder, cfg))
        cursor += len(parsed.searches)
        iterations.append(rec)
    final_ok = traj.finish_reason == "answered" and traj.answer is not None
    if iterations:
        last = iterations[-1]
        upd: dict[str, object] = {"last": True}
        if not final_ok:
            upd.update(status="failed", reason=f"agent_{traj.finish_reason}: the agent gave no answer")
        iterations[-1] = last.model_copy(update=upd)
    else:
        iterations.append(IterationRecord(id=f"{item.id}-i0", item_id=item.id, n=0, last=True, status="failed",
                                          reason=f"agent_{traj.finish_reason}: no planner turn",
                                          provenance=Provenance(stage="iterations", model=model)))
    iterations[0].provenance.usage = traj.usage  # the whole agent run's cost, counted once
    return plan, iterations, subs, sels


def _selection(item: EviItem, sid: str, question: str, answer: str, context: list[str], thought: str,
               select: list[int] | None, embedder: Embedder, cfg: EviPathConfig) -> SelectionRecord:
    gold_texts = [f.text[:200] for f in item.gold_facts() if f.text.strip()]
    holding = [i for i, c in enumerate(context) if any(containment(g, c) >= HOLDS for g in gold_texts)]
    positions: list[int] = []
    sims: list[float] = []
    fallback = False
    if holding and answer:
        vecs = embedder.embed([answer] + [context[i] for i in holding], kind="passage")
        chosen, sims, fallback = select_evidence(vecs[0], vecs[1:], cfg.executor.tau)
        positions = sorted(holding[c] for c in chosen)
    reason = None if holding else "no_gold_retrieved: no retrieved passage holds gold evidence"
    return SelectionRecord(id=sid, item_id=item.id, question=question, answer=answer, evidence=context,
                           gold_positions=positions, similarities=sims, fallback=fallback, thought=thought,
                           supporting=[context[p] for p in positions], select=select, status="ok" if holding and select is not None else "failed",
                           reason=reason or (None if select is not None else "parse_error: no <select>"),
                           provenance=Provenance(stage="selections", model="rule:eq6"))


__all__ = ["run_agent", "agent_path", "trajectory_records"]
