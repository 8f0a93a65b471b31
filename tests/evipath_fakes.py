"""A gold-data fake for EviPath whose training targets are clean (tests and benchmarks): the shared
``GoldDecompositionLLM`` with the fix the gates of issue 22 called for: its f_QA looks a
sub-question up in every item, so two items asking the same sub-question get the first item's
answer (an invented sub-answer). Here f_QA answers from the item whose gold paragraphs are in the
request. (Its executor thought also said "The golden evidence [i] states it"; the shared fake now
says "Evidence [i] states it".)"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agentrag.records import Message
from agentrag.testing import GoldDecompositionLLM


class CleanGoldLLM(GoldDecompositionLLM):
    def __init__(self, records: Sequence[dict[str, Any]], **kw: Any) -> None:
        super().__init__(records, **kw)
        for it, rec in zip(self.items, records, strict=True):
            it["keys"] = [" ".join(p["paragraph_text"].split())[:60] for p in rec["paragraphs"] if p.get("is_supporting")]

    def _step(self, item: dict[str, Any], n_done: int) -> str:
        rounds = self._batches(item)
        if n_done >= len(rounds) and item["answer"].lower() in ("yes", "no"):  # a comparison's judgement
            known = "; ".join(f"#{k + 1} is {a}" for k, (_, a) in enumerate(item["subs"]))
            return f"<think>Known: {known}. Comparing them, the answer is {item['answer']}.</think>\n" \
                f"<answer>{item['answer']}</answer>"
        return super()._step(item, n_done)

    def _reply(self, messages: list[Message]) -> str:
        from agentrag.synth.evipath.answering import QA_SYSTEM

        system = messages[0].content if messages and messages[0].role == "system" else ""
        last = messages[-1].content or ""
        if system == QA_SYSTEM:
            q = next(line[len("Question: "):] for line in last.splitlines() if line.startswith("Question: "))
            flat = " ".join(last.split())
            for it in self.items:
                if it["keys"] and all(k in flat for k in it["keys"]):
                    answers = [a for _, a in it["subs"]]
                    for sq, a in it["subs"]:
                        if self._fill(sq, answers) == q:
                            return f"The answer to \"{q}\" is {a}."
            return f'The answer to "{q}" is unknown.'
        return super()._reply(messages)


_STOP = frozenset("a an the of in on at to for from by with and or is are was were be been it its this that what "
                  "who which when where how did does do s answer question".split())


class ContentWordEmbedder:
    """φ for tests: hashed bag of content words (no function words), 4096 dimensions. The shared
    64-dimension ``HashEmbedder`` counts "the"/"of" and collides, so Eq. 6 picked paragraphs that do
    not hold the answer, which the sub-answer support gate now rejects."""

    def __init__(self, dim: int = 4096) -> None:
        self.dim = dim

    def embed(self, texts: list[str], kind: str = "query") -> Any:
        import hashlib

        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in re.findall(r"[^\W_]+", t.lower()):
                if tok not in _STOP:
                    out[i, int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little") % self.dim] += 1
            norm = float(np.linalg.norm(out[i]))
            if norm:
                out[i] /= norm
        return out


def twowiki_as_gold(rec: dict[str, Any]) -> dict[str, Any]:
    """A raw 2Wiki record with a MuSiQue-style ``question_decomposition`` made from its evidence
    triples (subject -- relation --> object; a subject that is an earlier object becomes ``#k``), and
    ``paragraphs`` = its supporting sentences, so :class:`CleanGoldLLM` can play it. The final
    answer is the record's (yes/no for comparisons)."""
    objects: dict[str, int] = {}
    decomposition = []
    for k, (s, r, o) in enumerate(rec["evidences"], start=1):
        subject = f"#{objects[s]}" if s in objects else s
        decomposition.append({"question": f"{subject} >> {r}", "answer": o})
        objects.setdefault(o, k)
    ctx = {t: sents for t, sents in rec["context"]}
    paras = [{"paragraph_text": ctx[t][i], "is_supporting": True} for t, i in rec["supporting_facts"]
             if t in ctx and i < len(ctx[t])]
    return {**rec, "question_decomposition": decomposition, "paragraphs": paras}
