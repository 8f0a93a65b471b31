"""The run header, the failure help and the synthesizer Summary sections of the viewer (issue 28)."""

from __future__ import annotations

from viewer_support import eval_run, ragshaper_run

from agentrag.report.viewer import build_payload
from agentrag.report.viewer.header import failure_help, run_header, synth_summary


def test_header_names_model_data_config_tokens_and_wall_time():
    cfg = {"llm": "openai:qwen@http://h/v1", "judge": "openai:big", "dataset": "d.jsonl", "kb": "runs/kb",
           "agent": "react", "agent_config": {"max_steps": 4, "top_k": 3}, "concurrency": 1}
    metrics = {"wall_s": 221.4, "llm": {"agent": {"hits": 2, "misses": 10, "prompt_tokens": 5000,
                                                  "completion_tokens": 300},
                                        "judge": {"hits": 0, "misses": 4, "prompt_tokens": 800, "completion_tokens": 8}}}
    h = dict(run_header("eval", cfg, metrics))
    assert h["model"] == "llm: openai:qwen@http://h/v1 · judge: openai:big"
    assert h["data"] == "dataset: d.jsonl · kb: runs/kb"
    assert "agent=react" in h["config"] and "agent_config.max_steps=4" in h["config"]
    assert h["tokens"] == "5,800 prompt + 308 completion, 16 calls" and h["wall time"] == "221.4 s"


def test_header_falls_back_to_the_records_usage():
    h = dict(run_header("eval", {"llm": "x"}, {}, [[10, 2, 1], [20, 3, 2]]))
    assert h["tokens"] == "30 prompt + 5 completion, 3 calls" and "wall time" not in h


def test_failure_help_names_the_setting():
    cfg = {"qa": {"max_tokens": 320}, "curator": {"max_tokens": 512}}
    assert "raise qa.max_tokens (now 320)" in failure_help(
        "parse_error: output cut off at max_tokens=320 before the JSON object closed", cfg)
    assert "agent_config.max_steps (now 4)" in failure_help(None, {"agent_config": {"max_steps": 4}}, "max_steps")
    assert "n_ctx" in failure_help("context_limit: 9000 tokens", {})
    assert "--llm" in failure_help("parse_error: not JSON", {})
    assert failure_help(None, {}, "answered") is None


def test_every_synthesizer_summary_has_its_report_sections(tmp_path):
    p = build_payload(ragshaper_run(tmp_path / "rs"))
    titles = [t["title"] for t in p.summary]
    assert titles.count("Funnel") == 1 and "LLM usage" in titles and len(titles) >= 4
    assert synth_summary("eval", {"n": 1}, set()) == []


def test_eval_payload_has_key_columns_first_and_gold_column(tmp_path):
    p = build_payload(eval_run(tmp_path / "ev", n=2))
    keys = [c["key"] for c in p.columns]
    assert keys[:7] == ["id", "question", "prediction", "gold", "em", "f1", "ok"]
    assert all(c.get("pin") for c in p.columns[1:7])
    assert p.rows[0][keys.index("gold")] == "answer 0"
    assert dict(p.header)["model"] == "llm: scripted"
