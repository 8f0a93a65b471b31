"""Fixture runs for the viewer tests: each made by the real pipeline on the fakes of
agentrag.testing (and the scripted worlds of the pipelines' own tests)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentrag.agents import build_agent
from agentrag.eval.runner import EvalConfig, evaluate, summarize
from agentrag.records import Message, Passage, QAItem, ToolCall
from agentrag.runs import RunDir
from agentrag.testing import FakeRetriever, ScriptedLLM

#: record text that must be shown, never executed
XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"></div>'

PASSAGES = [Passage(id=f"p{i}", title=f"Town {i}", text=f"Town {i} has the answer {i} and a river.")
            for i in range(6)] + [Passage(id="evil", title="Evil </script> page", text=f"answer river town {XSS}")]


def eval_items(n: int = 6) -> list[QAItem]:
    return [QAItem(id=f"q{i}", question=f"Which answer has town {i}?", golden_answers=[f"answer {i}"],
                   hops=1 + i % 3, supporting_passage_ids=[f"p{i}"]) for i in range(n)]


def _react(messages: list[Message], **_: Any) -> Any:
    """Searches ``hops`` times, then answers: right for even-numbered questions, wrong for odd."""
    question = next(m.content for m in messages if m.role == "user") or ""
    i = int(re.search(r"town (\d+)", question).group(1))  # type: ignore[union-attr]
    done = sum(m.role == "tool" for m in messages)
    if done < 1 + i % 3:
        query = f"town {i} answer river" + (" evil page script" if i == 1 else "")
        return ToolCall(name="dense_search", arguments={"query": query, "top_k": 3})
    return f"It says so. <answer>{'answer ' + str(i) if i % 2 == 0 else 'wrong'}</answer>"


def eval_run(out: Path, n: int = 6) -> Path:
    """A react eval run over ``n`` questions (even ones right), with its dataset, config and metrics."""
    out.mkdir(parents=True, exist_ok=True)
    items = eval_items(n)
    dataset = out.parent / f"{out.name}_dataset.jsonl"
    dataset.write_text("".join(json.dumps({"id": i.id, "question": i.question, "golden_answers": i.golden_answers,
                                           "metadata": {"hops": i.hops, "supporting_passage_ids": i.supporting_passage_ids}})
                               + "\n" for i in items))
    run = RunDir(out)
    run.write_config(EvalConfig(dataset=str(dataset), kb="fake", agent="react", llm="scripted"))
    agent = build_agent("react", ScriptedLLM(default=_react), FakeRetriever(PASSAGES))
    results = evaluate(agent, items, run, concurrency=1)
    run.write_json("metrics.json", summarize(results))
    return out


def ragshaper_run(out: Path) -> Path:
    from test_ragshaper_support import ShaperRun, curator_llm, main_retriever, teacher_llm

    from agentrag.synth.ragshaper.components import RagShaperComponents
    from agentrag.synth.ragshaper.config import RagShaperConfig

    cfg = RagShaperConfig()
    cfg.curator.max_depth = 4
    comps = RagShaperComponents(curator=curator_llm(), teacher=teacher_llm(), main_kb=main_retriever(),
                                distractor_kb=lambda ps: FakeRetriever(ps, kb="distractor"), tagger=curator_llm())
    ShaperRun(RunDir(out), cfg, comps).run(["Ada Varn", "Ott Brem"])
    return out


def reasonrag_run(out: Path) -> Path:
    from test_reasonrag_pipeline import QUESTION, config, policy, retriever

    from agentrag.synth.reasonrag import run_reasonrag

    run_reasonrag(config(), out, llm=ScriptedLLM(default=policy), retriever=retriever(), questions=[QUESTION])
    return out


def tracer_run(out: Path) -> Path:
    from tracer_support import run_world

    run_world(out)
    return out


def evipath_run(out: Path, musique: Path, n: int = 3) -> Path:
    from agentrag.synth.evipath import EviPathRunConfig, run_evipath
    from agentrag.testing import GoldDecompositionLLM, HashEmbedder

    records = [json.loads(line) for line in musique.read_text().splitlines()[:n]]
    run_evipath(EviPathRunConfig(datasets=[str(musique)], limit=n, concurrency=1), out,
                planner=GoldDecompositionLLM(records), embedder=HashEmbedder())
    return out
