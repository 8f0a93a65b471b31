"""The executor's training context: what the ``planner_executor`` agent's executor is shown.

The agent's executor sees the ``top_k`` passages one Search retrieved, each a knowledge-base
passage (a whole paragraph: MuSiQue's paragraphs, HotpotQA's and 2Wiki's context paragraphs with
their sentences joined, as ``agentrag kb build`` ingests them) rendered ``title: text`` and cut at
``max_passage_chars`` (:func:`agentrag.agents.planner_executor.passage_text`). With
``executor.context: agent`` (the default) the executor's training record shows the same: the gold
passages (the paragraphs holding F̂_i) are always in; the other places are filled by the
sub-question's retrieval from the synthesizer's KB (``--kb``), or without a KB by the item's own
distractor paragraphs; the list is shuffled with the run's seed. ``executor.context: facts`` shows
every fact of F shuffled (sentences for HotpotQA and 2Wiki), as the paper's executor prompt does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentrag.agents.planner_executor import passage_text
from agentrag.kb.base import Retriever
from agentrag.kb.ingest import passage_id
from agentrag.records import Hit
from agentrag.synth.evipath.schema import EviItem


@dataclass(frozen=True)
class Unit:
    """One passage of the item as the KB holds it, and the facts of F it is made of."""

    title: str
    text: str
    facts: tuple[int, ...]

    @property
    def key(self) -> str:
        return passage_id(self.title, self.text)


def passage_units(item: EviItem) -> list[Unit]:
    """The item's passages in the KB's unit: a MuSiQue fact is a paragraph; HotpotQA and 2Wiki
    facts are sentences, and consecutive sentences of one title make its paragraph."""
    units: list[Unit] = []
    for f in item.facts:
        title, text = " ".join(f.title.split()), " ".join(f.text.split())
        if item.source != "musique" and units and units[-1].title == title and units[-1].facts[-1] == f.idx - 1:
            last = units[-1]
            units[-1] = Unit(title, f"{last.text} {text}", (*last.facts, f.idx))
        else:
            units.append(Unit(title, text, (f.idx,)))
    return units


def _shown(unit: Unit, max_chars: int | None) -> str:
    return passage_text(Hit(id=unit.key, title=unit.title, text=unit.text, score=0.0), max_chars)


def agent_context(item: EviItem, chosen_facts: Sequence[int], question: str, shuffle: Callable[[int, str], list[int]],
                  *, top_k: int, max_chars: int | None, retriever: Retriever | None,
                  ) -> tuple[list[str], list[int], str | None]:
    """The executor's evidence for one sub-question as the agent shows it: ``(evidence,
    gold_positions, problem)``. ``chosen_facts``: the facts of F (indices) Eq. 6 chose; their
    paragraphs are the gold passages, always shown. ``shuffle(n, salt)``: a seeded permutation of
    range(n) (:func:`~agentrag.synth.evipath.answering.shuffled_order` for the sub-question), which
    picks the item's distractors (no KB) and orders the list. ``problem``: why
    the context cannot train the executor (a gold fact past ``max_chars``), else None."""
    units = passage_units(item)
    gold = [u for u in units if set(u.facts) & set(chosen_facts)]
    gold_keys = {u.key for u in gold}
    free = max(0, top_k - len(gold))
    if retriever is not None:
        hits = retriever.search([question], top_k + len(gold))[0] if free else []
        others = [passage_text(h, max_chars) for h in hits
                  if passage_id(h.title, h.text) not in gold_keys][:free]
    else:
        pool = [u for u in units if u.key not in gold_keys]
        others = [_shown(pool[i], max_chars) for i in shuffle(len(pool), "distractors")][:free]
    shown = [_shown(u, max_chars) for u in gold] + others
    places = shuffle(len(shown), "")
    evidence = [shown[i] for i in places]
    gold_positions = sorted(places.index(g) for g in range(len(gold)))
    problem = None
    if max_chars is not None:
        for u in gold:
            kept = " ".join(u.text[:max_chars].split())
            cut = [i for i in chosen_facts if i in u.facts and " ".join(item.facts[i].text.split()) not in kept]
            if cut:
                problem = (f"gold_cut: the gold evidence of {u.title!r} lies past max_passage_chars={max_chars} "
                           "(the agent's executor would not see it)")
                break
    return evidence, gold_positions, problem


__all__ = ["Unit", "passage_units", "agent_context"]
