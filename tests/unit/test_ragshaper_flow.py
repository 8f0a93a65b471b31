"""RAGShaper's stages overlap per item (SynthRun.flow): a tree's QA synthesis starts as soon as
that tree is written (path selection is per tree), and a trajectory's behaviour tag as soon as
that trajectory is written and filtered, without waiting for the slowest item of the stage
before. K~ (the distractor KB over every tree's distractors) stays a barrier before elicitation."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from test_ragshaper_support import ShaperRun, curator_reply, main_retriever, teacher_reply

from agentrag.exec import ThreadExecutor
from agentrag.records import Message
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import RagShaperConfig
from agentrag.testing import FakeRetriever, ScriptedLLM

FAST, SLOW = "Ada Varn fast", "Ada Varn slow"


class World:
    """The support world, with the slow seed's exploration and elicitation slowed down, and an
    ordered log of what each request was for."""

    def __init__(self, delay: float = 0.15) -> None:
        self.delay, self.events, self.lock = delay, [], threading.Lock()  # type: ignore[var-annotated]

    def log(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def curator(self, messages: list[Message], **kw: Any) -> str:
        name = (kw.get("response_format") or {}).get("json_schema", {}).get("name")
        text = "\n".join(m.content or "" for m in messages)
        who = "slow" if SLOW in text else "fast" if FAST in text else "?"
        if name == "curator_action" and who == "slow":
            time.sleep(self.delay)
        out = curator_reply(messages, **kw)
        self.log(f"{name}:{who}")  # logged when the reply is ready (a slow step ends here)
        return out

    def teacher(self, messages: list[Message], **kw: Any) -> Any:
        text = "\n".join(m.content or "" for m in messages)
        who = "slow" if SLOW in text else "fast" if FAST in text else "?"
        if who == "slow":
            time.sleep(self.delay)
        out = teacher_reply(messages, **kw)
        self.log(f"teacher:{who}")
        return out


def _run(tmp_path: Path, world: World) -> dict[str, Any]:
    comps = RagShaperComponents(curator=ScriptedLLM(default=world.curator), teacher=ScriptedLLM(default=world.teacher),
                                main_kb=main_retriever(), distractor_kb=lambda ps: FakeRetriever(ps, kb="distractor"),
                                tagger=ScriptedLLM(default=world.curator))
    cfg = RagShaperConfig()
    cfg.curator.max_depth = 3
    return ShaperRun(tmp_path / "run", cfg, comps, executor=ThreadExecutor(4)).run([FAST, SLOW])


def test_a_later_stage_of_one_item_starts_before_the_slowest_item_of_the_earlier_stage_ends(tmp_path: Path) -> None:
    world = World()
    m = _run(tmp_path, world)
    ev = world.events
    last = {e: i for i, e in enumerate(ev)}
    first = {e: i for i, e in reversed(list(enumerate(ev)))}
    # the fast tree's questions were synthesized while the slow tree was still being explored
    assert first["qa_pair:fast"] < last["curator_action:slow"], ev
    # the fast trajectory was tagged while the slow one was still being elicited
    assert first["behaviour_tag:fast"] < last["teacher:slow"], ev
    # K~ is a barrier: no teacher call before the last exploration step of any tree
    assert first["teacher:fast"] > last["curator_action:slow"], ev
    funnel = {f["stage"]: (f["in"], f["out"]) for f in m["funnel"]}
    assert funnel["explore"] == (2, 2) and m["unfinished"] == 0
    assert funnel["tag"][1] == funnel["elicit"][1] > 0


def test_the_overlapped_run_writes_what_a_run_without_overlap_writes(tmp_path: Path) -> None:
    """One item in flight (no overlap possible) and four: the same records, ids and funnel."""
    got = {}
    for conc in (1, 4):
        world = World(delay=0.0)
        comps = RagShaperComponents(curator=ScriptedLLM(default=world.curator),
                                    teacher=ScriptedLLM(default=world.teacher), main_kb=main_retriever(),
                                    distractor_kb=lambda ps: FakeRetriever(ps, kb="distractor"),
                                    tagger=ScriptedLLM(default=world.curator))
        cfg = RagShaperConfig()
        cfg.curator.max_depth = 3
        run = tmp_path / f"run{conc}"
        m = ShaperRun(run, cfg, comps, executor=ThreadExecutor(conc)).run([FAST, SLOW, "Ada Varn third"])
        files = {p.name: sorted(json.loads(x)["id"] for x in p.read_text().splitlines()) for p in sorted(run.glob("*.jsonl"))}
        got[conc] = (files, m["funnel"], m["unfinished"])
    assert got[1] == got[4]
    assert got[1][0]["tags.jsonl"] and got[1][0]["qa.jsonl"]
