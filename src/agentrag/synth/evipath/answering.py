"""Faithful sub-question answering (executor side, §4.2, Eq. 6):

    a_i = f_QA(q_i, F̂),   F̂_i = {ζ ∈ F̂ : cos(φ(ζ), φ(a_i)) > τ},   R_i^(s) = f_think(q_i, a_i, F̂_i, F)

with the single most similar ζ when no evidence passes τ (footnote 1). When the evidence chosen
does not state the sub-answer but another fact of F̂ does, that fact is chosen (:func:`repair`,
ours: the paper keeps Eq. 6's choice). The thought is written
over the evidence the agent's executor is shown (``executor.context``, :mod:`.context`), or F,
shuffled with a seeded RNG and shown as an indexed list; the LLM is told which indices
hold F̂_i (Table 9) and must select them.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from functools import partial

import numpy as np

from agentrag.agents.pe_protocol import parse_executor, render_evidence
from agentrag.kb.base import Embedder, Retriever
from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance
from agentrag.synth.common import call_text
from agentrag.synth.evipath.config import ExecutorSynthConfig
from agentrag.synth.evipath.context import agent_context
from agentrag.synth.evipath.demos import QA_DEMO, THINK_DEMO
from agentrag.synth.evipath.schema import EviItem, SelectionRecord

QA_SYSTEM = (
    "Answer the question using only the evidence given. Reply with exactly one complete declarative "
    "sentence that states the answer and names its subject in full (no pronouns), and nothing else." + QA_DEMO)

THINK_SYSTEM = (
    "You write the reasoning that leads from a question to its answer through the evidence.\n"
    "You get a question, a numbered list of evidence that contains irrelevant noise, the answer, and the "
    "indices of the golden evidence that supports it.\n"
    "1. Between <think> and </think>, say what the question asks for and summarize what the golden "
    "evidence states about it. Rely on the golden evidence only; do not mention the other items.\n"
    "2. Between <select> and </select>, give the indices of the golden evidence, e.g. [3] or [1, 7].\n"
    "3. Between <answer> and </answer>, restate the given answer as one sentence.\n"
    "Write the thought as if you had found the evidence yourself: never call it golden or gold, never say "
    "that the answer was given." + THINK_DEMO)


def qa_messages(question: str, evidence: Sequence[str]) -> list[Message]:
    ev = "\n".join(f"- {' '.join(e.split())}" for e in evidence)
    return [Message(role="system", content=QA_SYSTEM),
            Message(role="user", content=f"Evidence:\n{ev}\n\nQuestion: {question}")]


def clean_sentence(text: str) -> str:
    """The answer sentence of an f_QA reply: tags and labels stripped, first non-empty line."""
    for tag_name in ("answer", "think"):
        text = text.replace(f"<{tag_name}>", "").replace(f"</{tag_name}>", "")
    for line in text.splitlines():
        line = line.strip().removeprefix("Answer:").strip()
        if line:
            return line
    return ""


def answer_subquestion(llm: LLM, question: str, item: EviItem, cfg: ExecutorSynthConfig,
                       ) -> tuple[str, Provenance, str | None]:
    """a_i = f_QA(q_i, F̂): ``(sentence, provenance, error)``."""
    text, prov, err = call_text(llm, qa_messages(question, item.qa_evidence(cfg.max_fact_chars)), stage="sub_answers",
                                max_tokens=cfg.max_tokens, temperature=cfg.temperature)
    sentence = clean_sentence(text or "")
    if err is None and not sentence:
        err = "empty_answer: f_QA returned no sentence"
    return sentence, prov, err


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of ``b`` to the vector ``a``."""
    na = float(np.linalg.norm(a)) or 1.0
    nb = np.linalg.norm(b, axis=1)
    nb[nb == 0] = 1.0
    return np.asarray((b @ a) / (nb * na), dtype=np.float64)


def select_evidence(answer_vec: np.ndarray, evidence_vecs: np.ndarray, tau: float) -> tuple[list[int], list[float],
                                                                                              bool]:
    """Eq. 6: indices of the evidence with cosine > τ to the answer; when none, the argmax
    (footnote 1). Returns ``(indices, similarities, fallback_used)``."""
    if len(evidence_vecs) == 0:
        return [], [], False
    sims = cosine(np.asarray(answer_vec, dtype=np.float64), np.asarray(evidence_vecs, dtype=np.float64))
    return choose(sims, tau)


def choose(sims: np.ndarray, tau: float) -> tuple[list[int], list[float], bool]:
    """Eq. 6 over given similarities: > τ, else the argmax (footnote 1)."""
    chosen = [i for i, s in enumerate(sims) if s > tau]
    if chosen:
        return chosen, [round(float(s), 4) for s in sims], False
    return [int(np.argmax(sims))], [round(float(s), 4) for s in sims], True


def repair(chosen: list[int], sims: np.ndarray, views: Sequence[Sequence[str]], question: str,
           answer: str) -> tuple[list[int], bool]:
    """Keep a correct path when Eq. 6 chose evidence that does not state the sub-answer (ours, a
    deviation from the paper, docs/evipath.md): if the facts of F̂ chosen do not state it
    (lexically, :func:`~agentrag.synth.evipath.support.sub_answer_problem`) but another fact of F̂
    does, that one is chosen instead (the most similar of those that state it). Returns
    ``(chosen, repaired)``."""
    from agentrag.synth.evipath.support import sub_answer_problem

    def states(idx: list[int]) -> bool:
        return sub_answer_problem(answer, [v for c in idx for v in views[c]], question) is None

    if not chosen or states(chosen):
        return chosen, False
    stating = [k for k in range(len(views)) if k not in chosen and states([k])]
    if not stating:
        return chosen, False
    return [max(stating, key=lambda k: float(sims[k]))], True


def shuffled_order(n: int, seed: int, key: str) -> list[int]:
    """A permutation of range(n), fixed by (seed, key) across runs and processes."""
    rng = random.Random(int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()[:16], 16))
    order = list(range(n))
    rng.shuffle(order)
    return order


def think_messages(question: str, evidence: Sequence[str], answer: str, gold_positions: Sequence[int]) -> list[Message]:
    golden = "\n".join(f"[{i}] {' '.join(evidence[i].split())}" for i in gold_positions)
    user = (f"Question: {question}\nSupporting evidence:\n{render_evidence(list(evidence))}\n"
            f"Answer: {answer}\nGolden evidence:\n{golden}")
    return [Message(role="system", content=THINK_SYSTEM), Message(role="user", content=user)]


def synthesize_selection(llm: LLM, embedder: Embedder, item: EviItem, sub_id: str, question: str, answer: str,
                         cfg: ExecutorSynthConfig, seed: int, retriever: Retriever | None = None) -> SelectionRecord:
    """F̂_i by Eq. 6 and the executor's thought R_i^(s) over the indexed evidence the executor is
    trained on: with ``cfg.context`` 'agent' what the planner_executor agent's executor is shown
    (:func:`~agentrag.synth.evipath.context.agent_context`; ``retriever``: the KB that fills it),
    with 'facts' the shuffled F."""
    gold = item.gold_facts()
    views = item.gold_views()  # 2Wiki: a fact is also seen through its evidence triples (max similarity)
    flat = [v for vs in views for v in vs]
    vecs = embedder.embed([answer] + flat, kind="passage")
    view_sims = cosine(np.asarray(vecs[0], dtype=np.float64), np.asarray(vecs[1:], dtype=np.float64))
    owner = [k for k, vs in enumerate(views) for _ in vs]
    fact_sims = np.full(len(gold), -1.0)
    for v, k in enumerate(owner):
        fact_sims[k] = max(fact_sims[k], view_sims[v])
    chosen, sims, fallback = choose(fact_sims, cfg.tau) if len(gold) else ([], [], False)
    chosen, repaired = repair(chosen, fact_sims, views, question, answer)
    problem = None
    if cfg.context == "agent":
        evidence, gold_positions, problem = agent_context(
            item, [gold[c].idx for c in chosen], question, lambda n, salt: shuffled_order(n, seed, sub_id + salt),
            top_k=cfg.top_k, max_chars=cfg.max_passage_chars, retriever=retriever)
    else:
        order = shuffled_order(len(item.facts), seed, sub_id)
        evidence = [item.facts[i].render(cfg.max_fact_chars) for i in order]
        position = {fact_idx: pos for pos, fact_idx in enumerate(order)}
        gold_positions = sorted(position[gold[c].idx] for c in chosen)
    record = partial(SelectionRecord, id=sub_id, item_id=item.id, question=question, answer=answer,
                     evidence=evidence, gold_positions=gold_positions, similarities=sims, fallback=fallback,
                     supporting=[v for c in chosen for v in views[c]], repaired=repaired)
    if problem is not None:
        return record(status="failed", reason=problem, provenance=Provenance(stage="selections", model="rule"))
    text, prov, err = call_text(llm, think_messages(question, evidence, answer, gold_positions), stage="selections",
                                max_tokens=cfg.max_tokens, temperature=cfg.temperature)
    parsed = parse_executor(text or "")
    if err is None and not parsed.thought:
        err = "parse_error: no <think> in the executor thought"
    if err is None and parsed.select is None:
        err = "parse_error: no <select> in the executor thought"
    return record(thought=parsed.thought, select=parsed.select, status="failed" if err else "ok", reason=err,
                  provenance=prov)


__all__ = ["QA_SYSTEM", "THINK_SYSTEM", "qa_messages", "clean_sentence", "answer_subquestion", "cosine",
           "select_evidence", "choose", "repair", "shuffled_order", "think_messages", "synthesize_selection"]
