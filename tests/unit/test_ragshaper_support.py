"""A deterministic fake world for the RAGShaper tests: a tiny chain corpus, a scripted curator
(JSON by response_format name) and a scripted teacher. Responses depend only on the request, so
reruns and resumed runs see the same answers."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from agentrag.records import Message, Passage, ToolCall
from agentrag.synth.ragshaper.config import DISTRACTOR_TYPES
from agentrag.testing import FakeRetriever, ScriptedLLM

PASSAGES = [
    Passage(id="p1", title="Ada Varn", text="Ada Varn was a chemist born in Lysa, a town on the river Orn."),
    Passage(id="p2", title="Lysa", text="Lysa is a town founded in 1820 by the merchant Ott Brem."),
    Passage(id="p3", title="Ott Brem", text="Ott Brem was a merchant whose company Brem & Sons opened in 1845."),
    Passage(id="p4", title="Brem & Sons", text="Brem & Sons built the Orn bridge, finished in 1901."),
    Passage(id="p5", title="Orn bridge", text="The Orn bridge, finished in 1901, crosses the river Orn at Lysa."),
    Passage(id="p6", title="River Orn", text="The river Orn flows through Lysa and Kell."),
]
ANSWER = "1901"


def main_retriever() -> FakeRetriever:
    return FakeRetriever(PASSAGES, kb="main")


def curator_reply(messages: list[Message], **kw: Any) -> str:
    rf = kw.get("response_format") or {}
    name = rf.get("json_schema", {}).get("name")
    user = messages[-1].content or ""
    if name == "curator_action":
        steps = len(re.findall(r"^Step \d+:", user, flags=re.M))
        tools = rf["json_schema"]["schema"]["properties"]["tool"]["enum"]
        sibling = "Another branch already did" in user
        if "write_distractor" in tools and steps % 2 == 1 and not sibling:
            return json.dumps({"intent": "confuse the last hop", "tool": "write_distractor",
                               "distractor_type": DISTRACTOR_TYPES[(steps // 2) % 4],
                               "original_fact": "", "guideline": "change the year"})
        words = re.findall(r"\[([^\]]+)\]", user)
        query = words[-1] if words else "Ada Varn"
        if sibling:  # a sibling branch takes another direction
            query = f"{query} river Orn Kell"
        return json.dumps({"intent": f"follow {query}", "tool": "dense_retrieval", "query": query, "top_k": 2})
    if name == "distractor_documents":
        n = rf["json_schema"]["schema"]["properties"]["documents"]["minItems"]
        fact = user.split("\n")[1][:40]
        return json.dumps({"documents": [{"title": f"Draft {j}: {fact}", "text": f"In the {1900 + j} draft, {fact}"}
                                         for j in range(n)]})
    if name == "qa_pair":
        seed = user.split("\n")[0].removeprefix("Seed entity: ")
        variant = hashlib.sha1(user.encode()).hexdigest()[:6]  # distinct paths -> distinct questions
        return json.dumps({
            "question": f"Starting from {seed} (case {variant}): in which year was the bridge of the founder's company finished?",
            "answer": ANSWER,
            # evidence quoted from the path's evidence documents (the grounded-hop check reads them)
            "reasoning_steps": [{"hop": i, "fact": f"fact {i}", "evidence": ev, "output": f"o{i}"}
                                for i, ev in enumerate(_evidence(user)[:3], start=1)],
            "negative_aspect": [{"dimension": "doppelganger", "misleading_claim": "1900 draft",
                                 "disambiguation": "it is a draft", "distraction_text": "In the 1900 draft"}]})
    if name == "verdict":
        return verdict_reply(user)
    if name == "behaviour_tag":
        return json.dumps({"tag": "direct_answer", "rationale": "it found the answer at once"})
    raise AssertionError(f"unexpected request {name!r}")


def verdict_reply(user: str, keep: bool = True) -> str:
    """The verifier's reply in this world: every item passes every check (``keep``), i.e. the
    statement holds for a check that keeps on "holds" and fails for one that rejects on it."""
    from agentrag.synth.verifier import CHECKS

    check = next((c for c in CHECKS.values() if c.statement.split("{")[0][:40] in user), None)
    holds = (check.keep_if if check is not None else True) == keep
    return json.dumps({"holds": holds, "reason": "scripted verifier"})


def _evidence(rendered: str) -> list[str]:
    """Distinct evidence texts of a rendered path (``- evidence: [title] text`` lines)."""
    texts = [m.group(1) for m in re.finditer(r"^- evidence: \[[^\]]*\] (.+)$", rendered, flags=re.M)]
    return list(dict.fromkeys(texts)) + [f"snippet {i}" for i in range(3)]


def teacher_reply(messages: list[Message], **kw: Any) -> Any:
    if any(m.role == "tool" for m in messages):
        return f"The bridge was finished in {ANSWER}. <answer>{ANSWER}</answer>"
    tool = (kw.get("tools") or [{"function": {"name": "dense_search"}}])[0]["function"]["name"]
    return ToolCall(name=tool, arguments={"query": messages[-1].content or ""})


def curator_llm() -> ScriptedLLM:
    return ScriptedLLM(default=curator_reply, model="fake-curator")


def teacher_llm() -> ScriptedLLM:
    return ScriptedLLM(default=teacher_reply, model="fake-teacher")


def test_fake_world_is_deterministic() -> None:
    msgs = [Message(role="user", content="Seed entity: Ada Varn\n\nPath so far:\n(no steps yet)")]
    rf = {"type": "json_schema", "json_schema": {"name": "curator_action", "schema": {
        "properties": {"tool": {"enum": ["dense_retrieval", "write_distractor"]}}}}}
    assert curator_reply(msgs, response_format=rf) == curator_reply(msgs, response_format=rf)
    assert json.loads(curator_reply(msgs, response_format=rf))["tool"] == "dense_retrieval"


class ShaperRun:
    """``ShaperRun(run_dir, cfg, comps).run(entities)``: a whole RAGShaper run through the driver
    (:func:`run_ragshaper` with the components and seeds given as objects); returns the metrics."""

    def __init__(self, run: Any, cfg: Any, comps: Any, executor: Any = None) -> None:
        self.out = getattr(run, "path", run)
        self.cfg, self.comps, self.executor = cfg, comps, executor

    def run(self, entities: list[str]) -> dict[str, Any]:
        from agentrag.synth.ragshaper import run_ragshaper

        return run_ragshaper(self.cfg, self.out, executor=self.executor, seeds=entities, components=self.comps)
