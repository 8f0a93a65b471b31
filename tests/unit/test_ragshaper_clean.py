"""Clean SFT data and what the report counts: malformed teacher turns keep a trajectory out of
the SFT export (counted in the funnel), the curator's silent repairs are recorded on the node,
every trajectory (kept or dropped) gets an LLM behaviour tag beside the rule-based one, the
teacher rolls out with the rollout prompt and the paper's tool, and the presets load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_ragshaper_pipeline import _cfg, _components, _lines
from test_ragshaper_support import ANSWER, ShaperRun, curator_reply, teacher_reply

from agentrag.records import Message, ToolCall
from agentrag.runs import RunDir
from agentrag.synth.ragshaper.config import RagShaperConfig, RagShaperRunConfig, load_preset
from agentrag.testing import ScriptedLLM


def test_malformed_turns_are_rejected_from_the_export_and_counted(tmp_path: Path) -> None:
    def sloppy_teacher(messages: list[Message], **kw: Any) -> Any:
        if not any(m.role == "tool" for m in messages) and not any(m.role == "assistant" for m in messages):
            return ToolCall(name="web_search", arguments={"query": "x"})  # unknown tool: a malformed turn
        return teacher_reply(messages, **kw)

    run = tmp_path / "r"
    metrics = ShaperRun(RunDir(run), _cfg(), _components(teacher=ScriptedLLM(default=sloppy_teacher))).run(
        ["Ada Varn"])
    funnel = {r["stage"]: r for r in metrics["funnel"]}
    kept = funnel["filter"]["out"]
    assert kept >= 1  # the teacher recovered and answered correctly ...
    sft = funnel["export"]
    assert sft["in"] == kept and sft["out"] == 0 and sft["rejected"] == {"malformed_turns": kept}  # ... yet no SFT
    assert metrics["export"]["with_malformed_turns"] == kept and not (run / "sft" / "trl_sft.jsonl").exists()


def test_keep_policy_exports_them(tmp_path: Path) -> None:
    cfg = _cfg()
    cfg.malformed_turns = "keep"
    teacher = ScriptedLLM(default=lambda m, **kw: ToolCall(name="nope", arguments={})
                          if len(m) == 2 else teacher_reply(m, **kw))
    metrics = ShaperRun(RunDir(tmp_path / "r"), cfg, _components(teacher=teacher)).run(["Ada Varn"])
    sft = next(r for r in metrics["funnel"] if r["stage"] == "export")
    assert sft["out"] == sft["in"] >= 1 and metrics["funnel_notes"]["export"]["kept_with_malformed_turns"] == sft["in"]


def test_curator_repairs_are_recorded_on_nodes_and_counted(tmp_path: Path) -> None:
    def lazy_curator(messages: list[Message], **kw: Any) -> str:
        rf = kw.get("response_format") or {}
        if rf.get("json_schema", {}).get("name") == "curator_action":
            user = messages[-1].content or ""
            if "Step 1:" in user and "Step 2:" not in user:
                return json.dumps({"intent": "", "tool": "write_distractor", "distractor_type": "rumour",
                                   "original_fact": "", "guideline": ""})
            if "Step" not in user.split("Path so far:")[1]:
                return json.dumps({"intent": "find the seed", "tool": "dense_retrieval", "query": ""})
        return curator_reply(messages, **kw)

    cfg = _cfg()
    cfg.curator.max_depth, cfg.curator.p_branch = 2, 0.0
    run = tmp_path / "r"
    metrics = ShaperRun(RunDir(run), cfg, _components(curator=ScriptedLLM(default=lazy_curator))).run(
        ["Ada Varn"])
    nodes = _lines(run / "trees.jsonl")[0]["nodes"]
    assert nodes[1]["repaired"] == ["empty query -> intent"]
    assert nodes[1]["action"]["arguments"]["query"] == "find the seed"
    assert nodes[2]["repaired"] == ["invalid distractor_type 'rumour' -> doppelganger",
                                    "empty original_fact -> latest document"]
    assert metrics["repaired"] == {"empty query -> intent": 1, "invalid distractor_type": 1,
                                   "empty original_fact -> latest document": 1}
    trees_row = next(r for r in metrics["funnel"] if r["stage"] == "explore")
    assert trees_row["input"] == "seeds" and metrics["funnel_notes"]["explore"]["repaired"] == metrics["repaired"]


def test_every_trajectory_is_tagged_by_the_llm_with_the_rule_view_beside(tmp_path: Path) -> None:
    wrong = ScriptedLLM(default=lambda m, **kw: "<answer>1850</answer>" if any(x.role == "tool" for x in m)
                        else teacher_reply(m, **kw))
    tagger_seen: list[str] = []

    def tagger(messages: list[Message], **kw: Any) -> str:
        tagger_seen.append(messages[-1].content or "")
        return json.dumps({"tag": "failure", "rationale": "the answer 1850 is wrong"})

    run = tmp_path / "r"
    metrics = ShaperRun(RunDir(run), _cfg(), _components(teacher=wrong, tagger=ScriptedLLM(default=tagger))).run(
        ["Ada Varn"])
    n = len(_lines(run / "trajectories.jsonl"))
    assert n >= 1 and len(tagger_seen) == n  # dropped trajectories are tagged by the LLM too
    assert all(f"Correct answer: {ANSWER}" in t for t in tagger_seen)
    tags = _lines(run / "tags.jsonl")
    assert {t["tag"] for t in tags} == {"failure"} and {t["rule_tag"] for t in tags} == {"failure"}
    assert metrics["tags"] == {"failure": n} and metrics["tags_rule"] == {"failure": n}
    report = (run / "report.md").read_text()
    assert "LLM tagger" in report and "rule-based" in report


def test_rule_tags() -> None:
    from agentrag.records import Hit, Step, Trajectory
    from agentrag.synth.ragshaper.analysis import rule_tag
    from agentrag.synth.ragshaper.schema import FilterRecord

    keep = FilterRecord(id="t", qa_id="q", prediction="1901", answer="1901", f1=1.0, kept=True)
    call = ToolCall(name="s", arguments={"query": "q"})
    found = Step(action=call, hits=[Hit(id="p", text="finished in 1901", score=1.0)])
    missed = Step(action=call, hits=[Hit(id="p", text="nothing useful", score=1.0)])
    meta = {"gold_answer": "1901"}
    assert rule_tag(Trajectory(id="t", question="q", steps=[Step(thought="x")], metadata=meta), keep) == "direct_answer"
    assert rule_tag(Trajectory(id="t", question="q", steps=[missed], metadata=meta), keep) == "fallback_success"
    met = {**meta, "distractors_met": [{"step": 1, "id": "d", "distractor_type": "doppelganger"}]}
    assert rule_tag(Trajectory(id="t", question="q", steps=[found], metadata=met), keep) == "handling_success"
    drop = keep.model_copy(update={"kept": False})
    assert rule_tag(Trajectory(id="t", question="q", steps=[found], metadata=met), drop) == "failure"


def test_teacher_rolls_out_with_the_rollout_prompt_and_the_papers_tool(tmp_path: Path) -> None:
    from agentrag.agents.rollout import ROLLOUT_TOOL

    comps = _components()
    ShaperRun(RunDir(tmp_path / "r"), _cfg(), comps).run(["Ada Varn"])
    first = comps.teacher.requests[0]  # type: ignore[attr-defined]
    system = first["messages"][0].content
    assert "own knowledge" in system and ROLLOUT_TOOL in system and "<answer>" in system
    assert [t["function"]["name"] for t in first["tools"]] == [ROLLOUT_TOOL]
    params = first["tools"][0]["function"]["parameters"]
    assert params["required"] == ["query"] and params["properties"]["top_k"]["minimum"] == 1
    # the evaluation prompt (Fig. 14) is a different text: it admits a miss, no fallback
    from agentrag.agents.prompts import REACT_SYSTEM
    assert "own knowledge" not in REACT_SYSTEM
    rec = json.loads((tmp_path / "r" / "sft" / "trl_sft.jsonl").read_text().splitlines()[0])
    assert rec["tools"][0]["function"]["name"] == ROLLOUT_TOOL and rec["messages"][0]["content"] == system


def test_presets() -> None:
    paper = RagShaperConfig.model_validate(load_preset("paper"))
    assert paper.curator.max_depth == 30 and paper.curator.threshold == 0.8 and paper.elicit.threshold == 0.8
    assert paper.curator.p_branch == 0.5 and paper.curator.branch_depths == 2 and paper.paths_per_tree == 2
    assert paper.elicit.p_e == 0.5 and paper.elicit.k_distractor == 2 and paper.elicit.max_steps >= 41
    assert paper.distractors.min_calls == 3 and paper.distractors.min_docs == 5 and paper.f1_threshold == 0.9
    # demo.yaml spells out the config defaults
    assert RagShaperConfig.model_validate(load_preset("demo")) == RagShaperConfig()
    with pytest.raises(Exception, match="unknown preset"):
        load_preset("huge")
    assert RagShaperRunConfig.model_validate({**load_preset("paper"), "preset": "paper"}).preset == "paper"


@pytest.mark.parametrize("policy", ["reject", "keep"])
def test_a_final_answer_outside_the_answer_tags_is_flagged_and_never_exported(tmp_path: Path, policy: str) -> None:
    """The teacher answers correctly but as a JSON reply, not in <answer> tags (issue 24 item 5)."""
    def json_teacher(messages: list[Message], **kw: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            return json.dumps({"answer": ANSWER})
        return teacher_reply(messages, **kw)

    cfg = _cfg()
    cfg.malformed_turns = policy  # type: ignore[assignment]
    run = tmp_path / "r"
    metrics = ShaperRun(RunDir(run), cfg, _components(teacher=ScriptedLLM(default=json_teacher))).run(["Ada Varn"])
    trajs = _lines(run / "trajectories.jsonl")
    assert trajs and all(t["answer"] == ANSWER for t in trajs)  # F1 = 1 ...
    assert all(t["metadata"]["flagged"] == "answer_not_in_format" for t in trajs)
    funnel = {r["stage"]: r for r in metrics["funnel"]}
    assert funnel["filter"]["out"] == 0 and funnel["filter"]["rejected"] == {"answer_not_in_format": len(trajs)}
    assert not (run / "sft" / "trl_sft.jsonl").exists()  # ... yet never SFT data


def test_answer_format_error_both_ways() -> None:
    from agentrag.records import Step, Trajectory
    from agentrag.synth.ragshaper.filter import answer_format_error, filter_trajectory, malformed_turns

    def traj(last: Step, answer: str | None) -> Trajectory:
        return Trajectory(id="t", question="q", steps=[last], answer=answer,
                          finish_reason="answered" if answer else "no_answer")

    tagged = traj(Step(thought="It is <answer>1901</answer>"), "1901")
    call = traj(Step(thought="", action=ToolCall(name="Final_Answer", arguments={"answer": "1901"})), "1901")
    assert answer_format_error(tagged) is None and answer_format_error(call) is None
    assert malformed_turns(tagged) == 0 and filter_trajectory(tagged, "1901").kept
    for bad in (traj(Step(thought="1901"), "1901"), traj(Step(thought='{"answer": "1901"}'), "1901"),
                traj(Step(thought="<answer>1902</answer>"), "1901")):
        assert answer_format_error(bad) and malformed_turns(bad) == 1
        rec = filter_trajectory(bad, "1901")
        assert not rec.kept and (rec.reason or "").startswith("answer_not_in_format: ")
    low = filter_trajectory(traj(Step(thought="<answer>1800</answer>"), "1800"), "1901")
    assert not low.kept and (low.reason or "").startswith("f1_below_threshold: ")
    assert answer_format_error(traj(Step(thought="no idea"), None)) is None  # no answer: the F1 filter's case


def test_the_teacher_tool_schema_is_the_papers(tmp_path: Path) -> None:
    """Fig. 10: query (string, minLength 1, required) and top_k (integer, minimum 1, no maximum)."""
    teacher = ScriptedLLM(default=teacher_reply)
    run = tmp_path / "r"
    ShaperRun(RunDir(run), _cfg(), _components(teacher=teacher)).run(["Ada Varn"])
    offered = [r["tools"] for r in teacher.requests if r.get("tools")]
    assert offered
    for tools in offered + [json.loads(line)["tools"] for line in (run / "sft" / "trl_sft.jsonl").read_text()
                            .splitlines()[:1]]:
        (tool,) = tools
        params = tool["function"]["parameters"]
        assert tool["function"]["name"] == "query_knowledge_base_dense" and params["required"] == ["query"]
        assert params["properties"]["top_k"] == {**params["properties"]["top_k"], "type": "integer", "minimum": 1}
        assert "maximum" not in params["properties"]["top_k"] and params["properties"]["query"]["minLength"] == 1
