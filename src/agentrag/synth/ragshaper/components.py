"""What a RAGShaper run talks to (:class:`RagShaperComponents`) and its seed entities.

The lowest module of the pipeline: the per-item functions (:mod:`.stages`), the worker recipe
(:mod:`.build`), the pipeline and the driver declaration (:mod:`.run`) all import it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentrag.errors import UserError
from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.paths import check_input_file
from agentrag.records import Passage, iter_json_objects
from agentrag.synth.ragshaper.elicit import AgentFactory


def seed_id(entity: str) -> str:
    return "s" + hashlib.sha1(entity.strip().encode("utf-8")).hexdigest()[:10]


def read_seeds(path: str | Path) -> list[str]:
    """Seed entities from a file: one per line (text; blank lines and ``#`` comments skipped) or
    JSONL objects with an ``entity`` / ``title`` / ``seed`` field."""
    p = check_input_file(path, "--seeds")
    seeds: list[str] = []
    if p.suffix in (".jsonl", ".json"):
        for lineno, obj in iter_json_objects(p):
            value = next((obj[k] for k in ("entity", "title", "seed") if k in obj), None)
            if not isinstance(value, str) or not value.strip():
                raise UserError(f"{p}:{lineno}: field 'entity' (or 'title' / 'seed') missing or not a string")
            seeds.append(value.strip())
    else:
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                seeds.append(line.strip())
    if not seeds:
        raise UserError(f"{p}: no seed entities in the file")
    return list(dict.fromkeys(seeds))


@dataclass
class RagShaperComponents:
    """What a run talks to. ``distractor_kb`` builds the secondary KB K~ from the distractor
    passages (called once per run, after exploration)."""

    curator: LLM
    teacher: LLM
    main_kb: Retriever
    distractor_kb: Callable[[list[Passage]], Retriever]
    tagger: LLM | None = None
    #: the gates' verifier LLM (questions of meaning about QA pairs and distractors); None: ``curator``
    verifier: LLM | None = None
    agent_factory: AgentFactory | None = None
    #: For executors running items in other processes (Ray): a picklable zero-argument callable
    #: that builds these components there (once per worker process), and how a worker opens the
    #: K~ the driver built (default: ``distractor_kb`` on the same passages).
    rebuild: Callable[[], RagShaperComponents] | None = None
    open_distractor_kb: Callable[[list[Passage]], Retriever] | None = None


__all__ = ["RagShaperComponents", "seed_id", "read_seeds"]
