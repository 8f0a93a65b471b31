"""A trajectory as the page shows it: steps (thought, tool call, retrieved documents with gold and
distractor marks, observation, usage, latency), shared by eval runs and RAGShaper teacher runs."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from agentrag.eval.metrics import normalize_answer
from agentrag.records import Hit, Trajectory
from agentrag.report.viewer.common import DocTable, Limits

#: hit marks: 0 plain, 1 a gold (supporting) passage, 2 not gold but contains a gold answer
PLAIN, GOLD, HAS_ANSWER = 0, 1, 2


def distractor_type(hit: Hit, types_by_id: Mapping[str, str]) -> str | None:
    """The K~ distractor type of ``hit`` (``None`` for a document of the main KB)."""
    from agentrag.agents.navigation import is_distractor

    dtype = hit.metadata.get("distractor_type")
    if isinstance(dtype, str) and dtype:
        return dtype
    if hit.id in types_by_id:
        return types_by_id[hit.id]
    return "unknown" if is_distractor(hit) or hit.kb == "distractor" else None


def hit_mark(hit: Hit, gold_ids: Collection[str], gold_titles: Collection[str], answers: Sequence[str]) -> int:
    if hit.id in gold_ids or (gold_titles and hit.title.strip().lower() in gold_titles):
        return GOLD
    text = f" {normalize_answer(hit.contents)} "
    if any(a and f" {a} " in text for a in answers):
        return HAS_ANSWER
    return PLAIN


def trajectory_detail(traj: Trajectory, docs: DocTable, limits: Limits, *, golds: Sequence[str] = (),
                      gold_ids: Collection[str] = (), gold_titles: Collection[str] = (),
                      types_by_id: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The steps of ``traj`` and its totals; documents go to ``docs`` and are referenced by index."""
    answers = [normalize_answer(g) for g in golds]
    titles = {t.strip().lower() for t in gold_titles}
    types = types_by_id or {}
    steps = []
    for s in traj.steps:
        hits = []
        for h in s.hits:
            idx = docs.add(h.id, h.title, h.text, h.kb, distractor_type(h, types))
            hits.append([idx, round(h.score, 4), hit_mark(h, gold_ids, titles, answers)])
        step: dict[str, Any] = {"th": limits.clip(s.thought), "rs": limits.clip(s.reasoning), "hits": hits,
                                "usage": [s.usage.prompt_tokens, s.usage.completion_tokens], "lat": round(s.latency, 3)}
        if s.action is not None:
            step["tool"] = s.action.name
            step["args"] = limits.clip(json.dumps(s.action.arguments, ensure_ascii=False))
        if s.observation is not None and not s.hits:  # with hits the documents show what was observed
            step["obs"] = limits.clip(s.observation)
        if s.error:
            step["err"] = limits.clip(s.error)
            step["raw"] = limits.clip(s.raw)
        steps.append(step)
    return {"steps": steps, "answer": traj.answer, "finish": traj.finish_reason, "agent": traj.agent,
            "model": traj.model, "elapsed": round(traj.elapsed, 3),
            "usage": [traj.usage.prompt_tokens, traj.usage.completion_tokens, traj.usage.calls]}


__all__ = ["trajectory_detail", "distractor_type", "hit_mark", "PLAIN", "GOLD", "HAS_ANSWER"]
