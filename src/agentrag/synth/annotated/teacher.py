"""Human annotations as search paths, and a path searched in the KB as a ``react`` trajectory.

A *path* is the list of hops a human annotator wrote down for a question:

- MuSiQue ``question_decomposition``: each sub-question (``#k`` replaced by the annotated answer
  of hop k; the ``entity >> relation`` shorthand and the web-search forms written as natural
  questions, :mod:`.questions`) with its answer and the title of its supporting paragraph;
- 2WikiMultihopQA ``evidences``: each triple ``[subject, relation, object]`` becomes the question
  of its relation ("director" -> "Who directed <subject>?", :data:`.questions.RELATIONS`) with
  answer ``object``, supported by the paragraph titled ``subject``.

:func:`search_path` runs every hop's query through the same retrieval tool the ``react`` agent
uses (same navigation, top-k, document format, tag neutralisation), so each observation is what
the KB returns; :func:`path_trajectory` writes the searches and the annotated final answer as
the trajectory the agent would have produced. No LLM is called anywhere.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from agentrag.agents.base import NavigationPolicy
from agentrag.agents.prompts import REACT_FORCE_ANSWER
from agentrag.agents.react import react_system_prompt
from agentrag.agents.tools import SEARCH_TOOL, RetrievalTool
from agentrag.records import Hit, Message, QAItem, Step, ToolCall, Trajectory
from agentrag.synth.annotated.questions import natural_question, relation_question

_REF = re.compile(r"#(\d+)")


@dataclass
class Hop:
    """One annotated hop: the query searched, the annotated answer, the supporting titles."""

    query: str
    answer: str
    support: list[str] = field(default_factory=list)


@dataclass
class SearchedHop:
    """A hop after its search: the observation the agent would see and the hits behind it."""

    hop: Hop
    observation: str
    hits: list[Hit]
    error: str | None = None


def _resolve(question: str, answers: list[str], answer: str = "") -> str:
    """``#k`` replaced by hop k's answer, then written as a natural question
    (:func:`~agentrag.synth.annotated.questions.natural_question`)."""
    def sub(m: re.Match[str]) -> str:
        k = int(m.group(1))
        return answers[k - 1] if 1 <= k <= len(answers) else m.group(0)

    return natural_question(_REF.sub(sub, question).strip(), answer)


def musique_hops(item: QAItem, paragraph_titles: dict[int, str]) -> list[Hop]:
    """The hops of a MuSiQue item (``metadata["decomposition"]``); ``paragraph_titles`` maps a
    paragraph index of the raw record to its title."""
    hops: list[Hop] = []
    answers: list[str] = []
    for d in item.metadata.get("decomposition", []):
        idx = d.get("paragraph_support_idx")
        title = paragraph_titles.get(idx) if isinstance(idx, int) else None
        hops.append(Hop(query=_resolve(str(d["question"]), answers, str(d["answer"])), answer=str(d["answer"]).strip(),
                        support=[title] if title else []))
        answers.append(str(d["answer"]).strip())
    return hops


def twowiki_hops(item: QAItem) -> list[Hop]:
    """The hops of a 2WikiMultihopQA item: one per evidence triple, supported by the subject's page."""
    titles = {t.lower(): t for t in item.metadata.get("supporting_titles", [])}
    hops = []
    for triple in item.metadata.get("evidences", []):
        if not (isinstance(triple, list) and len(triple) == 3):
            continue
        s, r, o = (str(x).strip() for x in triple)
        support = [titles[s.lower()]] if s.lower() in titles else list(titles.values())
        hops.append(Hop(query=relation_question(s, r, o), answer=o, support=support))
    return hops


def item_hops(item: QAItem, paragraph_titles: dict[int, str] | None = None) -> list[Hop]:
    """The annotated hops of an item of either source (empty when it has no annotation)."""
    if item.metadata.get("source") == "musique":
        return musique_hops(item, paragraph_titles or {})
    if item.metadata.get("source") == "2wiki":
        return twowiki_hops(item)
    return []


def new_tool(policy: NavigationPolicy, top_k: int, max_top_k: int | None,
             doc_chars: int | None = None) -> RetrievalTool:
    """The retrieval tool exactly as the react agent builds it (neutralised documents)."""
    return RetrievalTool(policy, name=SEARCH_TOOL, default_k=top_k, max_k=max_top_k, neutralize=True,
                         doc_chars=doc_chars)


def search_path(hops: list[Hop], tool: RetrievalTool) -> list[SearchedHop]:
    """Search every hop's query in the KB through ``tool`` (an outage propagates)."""
    out = []
    for hop in hops:
        res = tool({"query": hop.query})
        out.append(SearchedHop(hop=hop, observation=res.observation, hits=list(res.hits), error=res.error))
    return out


def path_trajectory(item: QAItem, searched: list[SearchedHop], *, thoughts: bool = True,
                    system_prompt: str | None = None) -> Trajectory:
    """The react trajectory of a searched path: one search step per hop, then ``<answer>``
    (``system_prompt``: the agent's ``system_prompt`` setting, ``{tool}`` filled in)."""
    traj = Trajectory(id=item.id, question=item.question, agent="react", model="human-annotation")
    for i, sh in enumerate(searched):
        thought = f"Found: {searched[i - 1].hop.answer}." if thoughts and i > 0 else ""
        call = ToolCall(id=f"call_{i}", name=SEARCH_TOOL, arguments={"query": sh.hop.query})
        traj.steps.append(Step(thought=thought, action=call, observation=sh.observation, hits=sh.hits,
                               error=sh.error))
    answer = item.golden_answers[0]
    traj.steps.append(Step(thought=f"<answer>{answer}</answer>"))
    traj.answer = answer
    traj.finish_reason = "answered"
    system = system_prompt.format(tool=SEARCH_TOOL) if system_prompt else react_system_prompt(SEARCH_TOOL)
    traj.messages = [Message(role="system", content=system),
                     Message(role="user", content=item.question)]
    traj.metadata = {"teacher": "human-annotation", "source": item.metadata.get("source"),
                     "type": item.metadata.get("type"), "hops": [h.hop.query for h in searched],
                     "topk_per_step": [len(h.hits) for h in searched]}
    return traj


def is_forced(item_id: str, share: float) -> bool:
    """Whether the path of ``item_id`` is written in the forced-answer form (a stable hash of the
    id, so a resumed run picks the same paths)."""
    return zlib.crc32(item_id.encode("utf-8")) % 1000 < round(share * 1000)


def forced_record(record: dict[str, Any]) -> dict[str, Any]:
    """A TRL record of a searched path rewritten as the react agent's forced last turn: the user
    message :data:`~agentrag.agents.prompts.REACT_FORCE_ANSWER` before the final answer, and no tool
    schema (the agent sends that turn without tools, so the chat template renders no tool block)."""
    msgs = list(record["messages"])
    if not msgs or msgs[-1]["role"] != "assistant" or msgs[-1].get("tool_calls"):
        raise ValueError("forced_record: the record does not end with the answer turn")
    msgs.insert(len(msgs) - 1, {"role": "user", "content": REACT_FORCE_ANSWER})
    return {**record, "messages": msgs, "tools": []}


def summary(searched: list[SearchedHop]) -> dict[str, Any]:
    """What the funnel records of one searched path."""
    return {"queries": [s.hop.query for s in searched], "answers": [s.hop.answer for s in searched],
            "support": [s.hop.support for s in searched], "retrieved": [[h.title for h in s.hits] for s in searched]}


__all__ = ["Hop", "SearchedHop", "musique_hops", "twowiki_hops", "item_hops", "new_tool", "search_path",
           "path_trajectory", "is_forced", "forced_record", "summary"]
