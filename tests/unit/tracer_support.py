"""A tiny scripted world for the Tracer builder tests: passages, a routing ScriptedLLM, a judge."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from agentrag.eval.judge import JUDGE_SYSTEM
from agentrag.records import Message, Passage
from agentrag.synth.tracer import TracerRunConfig, run_tracer
from agentrag.synth.tracer.prompts import (
    ANNOTATE_SYSTEM,
    ANSWER_CLOSED_SYSTEM,
    ANSWER_DOCS_SYSTEM,
    ATOMIC_SYSTEM,
    AUDIT_SYSTEM,
    COMPOSE_SYSTEM,
    LINK_SYSTEM,
)
from agentrag.testing import FakeRetriever, ScriptedLLM

FILL = " It is described at length in the encyclopedia with many further details about its history."
PASSAGES = [
    Passage(id="p-amherst", title="Amherst, Victoria",
            text="Amherst is a locality in Victoria, Australia. By 1857 a Wesleyan church had been established in "
                 "the town, next to the school." + FILL),
    Passage(id="p-wesley", title="Wesleyanism",
            text="Wesleyanism is a movement of Protestant Christians. The Wesleyan church is closely associated "
                 "with Arminianism as its theological perspective." + FILL),
    Passage(id="p-armin", title="Arminianism",
            text="Arminianism is a branch of Protestantism based on the ideas of the Dutch theologian Jacobus "
                 "Arminius." + FILL),
    Passage(id="p-jacobus", title="Jacobus Arminius",
            text="Jacobus Arminius was a Dutch theologian. At Amsterdam, Arminius taught sermons on the Epistle "
                 "to the Romans." + FILL),
    Passage(id="p-hotpot", title="Excluded Title",
            text="Excluded Title is a page that also appears in an existing benchmark about Arminianism and "
                 "Wesleyan church history." + FILL),
]

Q1 = "What type of church was established in Amherst, Victoria by 1857?"
Q2 = "Which theological perspective is associated with the type of church established in Amherst, Victoria by 1857?"
Q3 = ("Which Dutch theologian's ideas underlie the theological perspective associated with the type of church "
      "established in Amherst, Victoria by 1857?")
Q4 = ("In which city did the Dutch theologian whose ideas underlie the theological perspective associated with the "
      "type of church established in Amherst, Victoria by 1857 teach sermons on the Epistle to the Romans?")
A2Q = "Which theological perspective is the Wesleyan church associated with?"
A3Q = "Which Dutch theologian's ideas is Arminianism based on?"
A4Q = "In which city did Jacobus Arminius teach sermons on the Epistle to the Romans?"

# question -> (answer, titles of the documents needed to answer it)
WORLD: dict[str, tuple[str, set[str]]] = {
    Q1: ("Wesleyan church", {"Amherst, Victoria"}),
    A2Q: ("Arminianism", {"Wesleyanism"}),
    A3Q: ("Jacobus Arminius", {"Arminianism"}),
    A4Q: ("Amsterdam", {"Jacobus Arminius"}),
    Q2: ("Arminianism", {"Amherst, Victoria", "Wesleyanism"}),
    Q3: ("Jacobus Arminius", {"Amherst, Victoria", "Wesleyanism", "Arminianism"}),
    Q4: ("Amsterdam", {"Amherst, Victoria", "Wesleyanism", "Arminianism", "Jacobus Arminius"}),
}
LINKS = {"Wesleyanism": (A2Q, "Arminianism"), "Arminianism": (A3Q, "Jacobus Arminius"),
         "Jacobus Arminius": (A4Q, "Amsterdam")}
COMPOSED = {A2Q: Q2, A3Q: Q3, A4Q: Q4}


def _field(text: str, name: str) -> str:
    m = re.search(rf"^{re.escape(name)}: (.*)$", text, re.MULTILINE)
    return m.group(1).strip() if m else ""


def world_reply(messages: list[Message], **_: Any) -> str:
    system, user = messages[0].content or "", messages[-1].content or ""
    if system == ANNOTATE_SYSTEM:
        return json.dumps({"entity_type": "place", "domain": "history" if "Amherst" in user else "religion"})
    if system == ATOMIC_SYSTEM:
        if "Title: Amherst, Victoria" in user:
            return json.dumps({"pairs": [{"question": Q1, "answer": "Wesleyan church", "aliases": ["Methodist church"]},
                                         {"question": "In which year was the church in Amherst established?",
                                          "answer": "1857"}]})
        return json.dumps({"pairs": []})
    if system == ANSWER_CLOSED_SYSTEM:
        return json.dumps({"answer": "unknown"})
    if system == ANSWER_DOCS_SYSTEM:
        q = _field(user, "Question")
        titles = set(re.findall(r"^\[\d+\] (.*)$", user, re.MULTILINE))
        ans, need = WORLD.get(q, ("unknown", {"?"}))
        return json.dumps({"answer": ans if need <= titles else "unknown"})
    if system == LINK_SYSTEM:
        title = _field(user, "New passage title")
        if title not in LINKS:
            return "this is not json"
        q, a = LINKS[title]
        return json.dumps({"template": "inference", "question": q, "answer": a})
    if system == COMPOSE_SYSTEM:
        second = _field(user, "Second question")
        return json.dumps({"question": COMPOSED[second], "answer": WORLD[COMPOSED[second]][0]})
    if system == AUDIT_SYSTEM:
        return json.dumps({"reason": "coherent", "valid": True})
    raise AssertionError(f"unexpected prompt: {system[:60]!r}")


def world_llm() -> ScriptedLLM:
    return ScriptedLLM(default=world_reply, model="world")


def judge_llm(score: int = 0) -> ScriptedLLM:
    return ScriptedLLM(default=json.dumps({"reason": "scripted", "score": score}), model="judge")


def run_config(out: Path, **kw: Any) -> TracerRunConfig:
    """The scripted world's run config for ``out``: 4 docs, 4 hops, one thread, "Excluded Title"
    excluded (its title file is written to a fresh temporary directory)."""
    excl = Path(tempfile.mkdtemp(prefix="tracer-excluded-")) / "titles.txt"
    excl.write_text("Excluded Title\n", encoding="utf-8")
    cfg = TracerRunConfig(docs=4, max_hops=4, concurrency=1, exclude=[str(excl)], **kw)
    cfg.sampling.min_chars = 0
    return cfg


def run_world(out: Path, cfg: TracerRunConfig | None = None, llm: Any = None, **given: Any) -> dict[str, Any]:
    """``run_tracer`` on the scripted world (objects given: LLM, judge, retriever, passages)."""
    given.setdefault("judge", judge_llm())
    given.setdefault("kb", FakeRetriever(PASSAGES))
    given.setdefault("passages", PASSAGES)
    return run_tracer(cfg or run_config(out), out, llm=llm or world_llm(), **given)


def stub_reply(body: dict[str, Any]) -> str:
    """The scripted world over HTTP (StubOpenAIServer): the judge's prompt gets score 0."""
    msgs = [Message(role=m["role"], content=m.get("content")) for m in body["messages"]]
    if (msgs[0].content or "") == JUDGE_SYSTEM:
        return json.dumps({"reason": "scripted", "score": 0})
    return world_reply(msgs)


def stub_llm_yaml(path: Path, base_url: str) -> str:
    """An LLM reference (YAML file) for the stub: no retries, no backoff."""
    path.write_text(f"backend: openai\nmodel: stub\nbase_url: {base_url}\nmax_retries: 0\nbackoff_initial: 0\n"
                    "timeout: 5\n", encoding="utf-8")
    return str(path)


def patched_llm(override: Any) -> ScriptedLLM:
    """The scripted world with some replies replaced: ``override(system, user, **kw)`` returns a
    reply, or None to keep the world's."""
    def reply(messages: list[Message], **kw: Any) -> str:
        got = override(messages[0].content or "", messages[-1].content or "", **kw)
        return world_reply(messages, **kw) if got is None else got
    return ScriptedLLM(default=reply, model="world")


def field(text: str, name: str) -> str:
    """The value of a ``Name: value`` line of a prompt."""
    return _field(text, name)


def titles_in(user: str) -> set[str]:
    """The titles of the documents an answer prompt shows."""
    return set(re.findall(r"^\[\d+\] (.*)$", user, re.MULTILINE))


def seeded_world(messages: list[Message], **kw: Any) -> str:
    """The world, with sampled calls (temperature > 0) varying with their seed the way a sampling
    backend does: an extra alias drawn from the seed (from the global RNG when unseeded)."""
    import random

    out = world_reply(messages, **kw)
    if not kw.get("temperature"):
        return out
    seed = kw.get("seed")
    draw = random.Random(seed).randrange(10**6) if seed is not None else random.randrange(10**6)
    obj = json.loads(out)
    for pair in obj.get("pairs", [obj]):
        pair["aliases"] = [*pair.get("aliases", []), f"variant {draw}"]
    return json.dumps(obj)
