"""RAGShaper end to end on the embedded model and a small real KB (HotpotQA contexts), via the CLI.

Small on purpose (depth 1, no branching, short completions): a 135M model rarely writes an
acceptable QA pair, so zero accepted trajectories is a valid outcome. What must hold: no crash,
every stage file exists, every funnel stage is accounted for (a rejected record says why), and
a rerun resumes without paying any LLM call again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.kb import KBConfig, KnowledgeBase
from agentrag.kb.ingest import pooled_passages
from rerun_check import rerun_pays_nothing

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SETTINGS = ["curator.max_depth=1", "curator.p_branch=0.0", "curator.max_tokens=128",
            "curator.max_observation_chars=200", "distractors.docs_per_call=1", "distractors.max_tokens=160",
            "qa.max_tokens=256", "elicit.max_steps=2", "elicit.max_tokens=96", "concurrency=2"]


@pytest.fixture(scope="module")
def small_kb(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = data_dir / "hotpotqa" / "dev_distractor_200.jsonl"
    sub = tmp_path_factory.mktemp("rs_kb") / "hotpot_sub.jsonl"
    with src.open(encoding="utf-8") as fh:
        sub.write_text("".join(next(fh) for _ in range(3)), encoding="utf-8")
    out = tmp_path_factory.mktemp("rs_kb_out") / "kb"
    KnowledgeBase.build(pooled_passages([sub]), out, KBConfig(), progress=False)
    return out


def _invoke(kb: Path, out: Path) -> dict[str, object]:
    args = ["synth", "ragshaper", "--kb", str(kb), "--seeds", "2", "--llm", "embedded", "--out", str(out)]
    for s in SETTINGS:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads((out / "metrics.json").read_text())


def test_embedded_pipeline_end_to_end_and_resume(small_kb: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    metrics = _invoke(small_kb, out)
    funnel = {row["stage"]: row for row in metrics["funnel"]}  # type: ignore[attr-defined]
    assert funnel["explore"]["in"] == 2 and funnel["explore"]["out"] == 2
    assert funnel["paths"]["out"] == 2
    qa = funnel["qa"]
    assert qa["out"] + sum(qa["rejected"].values()) == qa["in"]  # every question accounted for
    assert funnel["elicit"]["out"] == qa["out"]
    for stage in ("seeds", "trees", "distractors", "paths", "qa", "trajectories", "filter", "tags"):
        assert (out / f"{stage}.jsonl").exists()
    for line in (out / "trees.jsonl").read_text().splitlines():
        for node in json.loads(line)["nodes"][1:]:
            prov = node["provenance"]
            assert prov["stage"] == "explore" and prov["model"] and prov["prompt_hash"]
            assert prov["raw_output"] is not None and prov["usage"]["completion_tokens"] > 0
    for line in (out / "qa.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert rec["status"] == "accepted" or rec["reason"]
    report = (out / "report.md").read_text()
    assert "## Funnel" in report and "Behaviour tags" in report

    # resume: the same command again pays no LLM call and changes no record
    again = rerun_pays_nothing(out, lambda: _invoke(small_kb, out))
    assert again["funnel"] == metrics["funnel"]


def _scripted_curator(messages: list, **kw: object) -> str:  # type: ignore[type-arg]
    """A deterministic curator (retrieve, then a distractor, ...) and an always-valid QA writer,
    so that the embedded *teacher* is exercised on real K and K~."""
    rf: dict = kw.get("response_format") or {}  # type: ignore[assignment]
    name = rf["json_schema"]["name"]
    user = messages[-1].content or ""
    if name == "curator_action":
        if user.count("Step ") % 2 == 1:
            return json.dumps({"intent": "confuse", "tool": "write_distractor", "distractor_type": "doppelganger",
                               "original_fact": "", "guideline": "change the year"})
        return json.dumps({"intent": "look up the seed", "tool": "dense_retrieval",
                           "query": user.split("\n")[0].removeprefix("Seed entity: "), "top_k": 3})
    if name == "distractor_documents":
        fact = user.split("\n")[1][:200]
        return json.dumps({"documents": [{"title": "Revised edition (2031)", "text": f"In the 2031 revision: {fact}"}]})
    if name == "qa_pair":
        seed = user.split("\n")[0].removeprefix("Seed entity: ")
        # evidence quoted from the path's documents, so the grounded-hop check accepts the pair, and
        # an answer those documents state (a name or a year of the first quote, not the seed's)
        quotes = re.findall(r"^- evidence: \[[^\]]*\] (.+)$", user, flags=re.M)
        names = [w for q in quotes for w in re.findall(r"\b[A-Z][a-z]{3,}\b", q[:200])
                 if w not in seed and w not in {"The", "This", "That", "Revised", "In"}]
        years = [y for q in quotes for y in re.findall(r"\b1[5-9]\d\d\b", q[:200])]
        answer = (names or years or ["unknown fact"])[0]
        return json.dumps({"question": f"Which name or year does the record of {seed} give?", "answer": answer,
                           "reasoning_steps": [{"hop": i, "fact": "f", "evidence": q[:200], "output": "o"}
                                               for i, q in enumerate(quotes[:3])], "negative_aspect": []})
    if name == "verdict":  # the curator is the verifier: every check passes (this test is about the teacher)
        from agentrag.synth.verifier import CHECKS

        check = next((c for c in CHECKS.values() if c.statement.split("{")[0][:40] in user), None)
        return json.dumps({"holds": check.keep_if if check is not None else True, "reason": "scripted"})
    return json.dumps({"tag": "direct_answer", "rationale": "r"})


class FirstSearchForced:
    """The embedded teacher, except that its first turn is a search for the question itself, so
    every trajectory has at least one retrieval step under Eq. 8 (the 135M model may otherwise
    answer at once). Later turns are the model's own."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.model = getattr(inner, "model", "")

    def chat(self, messages: list, tools: list | None = None, **kw: object) -> list:  # type: ignore[type-arg]
        from agentrag.llm.base import Completion
        from agentrag.records import ToolCall

        if tools and not any(m.role == "tool" for m in messages):
            question = next(m.content for m in messages if m.role == "user")
            call = ToolCall(id="call_0", name=tools[0]["function"]["name"], arguments={"query": question})
            return [Completion(text=None, tool_calls=[call], finish_reason="tool_calls")]
        return self.inner.chat(messages, tools=tools, **kw)  # type: ignore[attr-defined]


def test_embedded_teacher_under_constrained_navigation(small_kb: Path, tmp_path: Path) -> None:
    from agentrag.agents.navigation import is_distractor
    from agentrag.agents.rollout import ROLLOUT_TOOL
    from agentrag.llm import resolve_llm
    from agentrag.records import Trajectory
    from agentrag.runs import RunDir
    from agentrag.synth.ragshaper import RagShaperComponents, RagShaperConfig, run_ragshaper
    from agentrag.synth.ragshaper.build import distractor_kb_factory
    from agentrag.testing import ScriptedLLM

    kb = KnowledgeBase.load(small_kb)
    run = RunDir(tmp_path / "run")
    cfg = RagShaperConfig(concurrency=1)
    cfg.curator.max_depth, cfg.curator.p_branch, cfg.paths_per_tree = 2, 0.0, 1
    cfg.elicit.max_steps, cfg.elicit.max_tokens = 3, 96
    teacher = FirstSearchForced(resolve_llm("embedded", cache=run.file("llm_cache.sqlite")))
    comps = RagShaperComponents(curator=ScriptedLLM(default=_scripted_curator), tagger=None, main_kb=kb,
                                teacher=teacher,  # type: ignore[arg-type]
                                distractor_kb=distractor_kb_factory(kb, run.path / "distractor_kb"))
    metrics = run_ragshaper(cfg, run.path, seeds=kb.sample_titles(1, seed=3), components=comps)
    funnel = {row["stage"]: row["out"] for row in metrics["funnel"]}
    assert funnel["qa"] == 1 and funnel["elicit"] == 1
    assert (run.path / "distractor_kb" / "params.json").exists()
    n_tilde = len((run.path / "distractors.jsonl").read_text().splitlines())
    assert n_tilde >= 1
    trajs = [Trajectory.model_validate_json(line) for line in (run.path / "trajectories.jsonl").read_text().splitlines()]
    assert trajs
    for traj in trajs:
        searches = [s for s in traj.steps if s.action is not None and s.action.name == ROLLOUT_TOOL and not s.error]
        assert searches, "the first turn is a forced search"
        # Eq. 8 on every search step of every trajectory
        per_step = [sum(is_distractor(h) for h in s.hits) for s in searches]
        assert per_step[0] == min(2, n_tilde)  # t = 1: R(K, k-2) U R(K~, 2)
        for prev, cur in zip(per_step, per_step[1:]):
            assert not (prev and cur), per_step  # never K~ right after K~
            assert cur in (0, min(2, n_tilde))
        assert all(h.kb == "distractor" for s in searches for h in s.hits if is_distractor(h))
        met = traj.metadata["distractors_met"]
        assert len(met) == sum(per_step) and met[0]["step"] == 1
        assert traj.metadata["distractor_types_met"] == ["doppelganger"]
        assert traj.metadata["provenance"]["model"]
