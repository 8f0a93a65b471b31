"""A gold-data fake for EviPath whose training targets are clean (tests and benchmarks): the shared
``GoldDecompositionLLM`` with two fixes the gates of issue 22 found in it: its executor thought said
"The golden evidence [i] states it" (synthesis-only wording), and f_QA looked a sub-question up in
every item, so two items asking the same sub-question got the first item's answer (an invented
sub-answer). Here f_QA answers from the item whose gold paragraphs are in the request."""

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
            it["keys"] = [" ".join(p["paragraph_text"].split())[:80] for p in rec["paragraphs"] if p.get("is_supporting")]

    def _reply(self, messages: list[Message]) -> str:
        from agentrag.synth.evipath.answering import QA_SYSTEM, THINK_SYSTEM

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
        text = super()._reply(messages)
        if system == THINK_SYSTEM:
            text = re.sub(r"The golden evidence (\[[\d, ]*\]) states it", r"Evidence \1 states it", text)
        return text


class ContentWordEmbedder:
    """φ for tests: hashed bag of content words (no function words), 4096 dimensions. The shared
    64-dimension ``HashEmbedder`` counts "the"/"of" and collides, so Eq. 6 picked paragraphs that do
    not hold the answer, which the sub-answer support gate now rejects."""

    def __init__(self, dim: int = 4096) -> None:
        self.dim = dim

    def embed(self, texts: list[str], kind: str = "query") -> Any:
        import hashlib

        import numpy as np

        from agentrag.synth.evipath.support import FUNCTION_WORDS, words

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in words(t):
                if tok not in FUNCTION_WORDS:
                    out[i, int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little") % self.dim] += 1
            norm = float(np.linalg.norm(out[i]))
            if norm:
                out[i] /= norm
        return out
