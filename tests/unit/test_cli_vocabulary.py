"""One option vocabulary (issue 28): new spellings in --help, old ones hidden but parsing; every
default shown; --print-config prints what config.yaml holds; another configuration on an existing
run directory is refused with the differing keys, or written beside it with --force-new-config."""

from __future__ import annotations

import json
import re

import pytest
import typer
import yaml
from typer.testing import CliRunner

import agentrag.kb
import agentrag.llm
from agentrag.cli.main import app
from agentrag.cli.runconfig import config_diff
from agentrag.records import Passage, ToolCall
from agentrag.testing import FakeRetriever, ScriptedLLM

runner = CliRunner()
ROOT = typer.main.get_command(app)


def _commands(group, path=()):
    out = [(" ".join(path), group)] if path else []
    for name, cmd in getattr(group, "commands", {}).items():
        out += _commands(cmd, (*path, name))
    return out


COMMANDS = dict(_commands(ROOT))


def _cmd(path):
    return COMMANDS[path]


def _visible(path):
    return {o for p in _cmd(path).params if not getattr(p, "hidden", False) for o in p.opts}


def _hidden(path):
    return {o for p in _cmd(path).params if getattr(p, "hidden", False) for o in p.opts}


def _parse(path, args):
    return _cmd(path).make_context(f"agentrag {path}", args, resilient_parsing=False).params


@pytest.mark.parametrize("path,new,old", [
    ("synth tracer review", "--out", "--run"),
    ("synth tracer", "--limit", "--docs"),
    ("kb search", "--top-k", "--topk"),
    ("kb serve", "--top-k", "--topk"),
    ("kb build", "--method", "-m"),
    ("kb search", "--method", "-m"),
    ("train sft", "--model", "-m"),
    ("train dpo", "--model", "-m"),
])
def test_new_spellings_are_listed_and_old_ones_hidden(path, new, old):
    assert new in _visible(path) and old not in _visible(path) and old in _hidden(path)


@pytest.mark.parametrize("path", ["eval", "synth ragshaper", "synth evipath", "synth reasonrag", "synth tracer",
                                  "llm chat", "llm serve"])
def test_dash_m_means_llm(path):
    opt = next(p for p in _cmd(path).params if "-m" in p.opts)
    assert "--llm" in opt.opts


def test_the_kb_is_an_option_everywhere_and_the_count_is_limit_n():
    for path in ("kb search", "kb serve", "kb stats", "kb eval-recall", "eval", "synth reasonrag"):
        assert "--kb" in _visible(path), path
    for path in ("eval", "synth tracer", "synth reasonrag", "synth evipath", "synth annotated", "kb eval-recall"):
        assert {"--limit", "-n"} <= _visible(path), path
    for path in ("eval", "synth tracer", "synth tracer review", "synth ragshaper", "synth reasonrag"):
        assert {"--out", "-o"} <= _visible(path), path


def test_old_spellings_still_parse_to_the_same_values():
    assert _parse("synth tracer review", ["--run", "r1"])["run_alias"].name == "r1"
    assert _parse("synth tracer", ["--docs", "3"])["docs"] == 3
    assert _parse("kb search", ["kbdir", "q", "--k", "7"])["topk_alias"] == 7
    assert _parse("kb search", ["kbdir", "q", "-k", "7"])["top_k"] == 7
    assert _parse("kb serve", ["kbdir", "--topk", "4"])["topk_alias"] == 4
    assert _parse("train sft", ["--data", "d", "--out", "o", "-m", "x"])["model_alias"] == "x"


def test_old_and_new_spelling_given_twice_with_different_values_is_an_error(tmp_path):
    r = runner.invoke(app, ["synth", "tracer", "--kb", "k", "--limit", "2", "--docs", "3", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "same option" in r.output


def test_old_review_spelling_still_runs(tmp_path):
    r = runner.invoke(app, ["synth", "tracer", "review", "--run", str(tmp_path / "none")])
    assert r.exit_code == 2 and "no such option" not in r.output.lower()


def test_kb_search_takes_kb_as_option_or_positional(tmp_path, monkeypatch):
    seen = []

    class R(FakeRetriever):
        def search(self, queries, k=5, threshold=None, **kw):
            seen.append((list(queries), k))
            return super().search(queries, k, threshold)

    monkeypatch.setattr("agentrag.kb.reference.resolve_retriever", lambda ref: R([Passage(id="a", title="A", text="x")]))
    assert runner.invoke(app, ["kb", "search", "--kb", "http://h:1", "q1", "q2", "--top-k", "2"]).exit_code == 0
    assert runner.invoke(app, ["kb", "search", "http://h:1", "q3", "--topk", "3"]).exit_code == 0
    assert seen == [(["q1", "q2"], 2), (["q3"], 3)]


def test_every_default_is_shown_in_help():
    missing = []
    for path, cmd in COMMANDS.items():
        for o in cmd.params:
            if not hasattr(o, "is_flag") or o.hidden or o.is_flag or o.required or o.default not in (None, ()):
                continue
            text = (o.help or "").lower()
            if "default" not in text and "required" not in text:
                missing.append(f"{path} {o.opts[0]}")
    assert missing == []


def test_executor_help_shows_ray_extra_literally():
    r = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "250"})
    assert "agentrag[ray]" in r.output


# -- --print-config and one configuration per run directory --------------------------------------

def _reply(messages, **kwargs):
    if any(m.role == "tool" for m in messages):
        return "<answer>Rush</answer>"
    return ToolCall(name="dense_search", arguments={"query": messages[-1].content})


@pytest.fixture()
def fakes(monkeypatch):
    monkeypatch.setattr(agentrag.llm, "resolve_llm", lambda ref="embedded", **kw: ScriptedLLM(default=_reply))
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: None)
    passages = [Passage(id="p1", title="Neil Peart", text="Neil Peart was the drummer of Rush.")]
    monkeypatch.setattr(agentrag.kb, "resolve_retriever", lambda ref: FakeRetriever(passages), raising=False)


def _eval_args(data_dir, out, *more):
    return ["eval", "--dataset", str(data_dir / "hotpotqa" / "dev_distractor_200.jsonl"), "--kb", "kbdir",
            "--llm", "agent-llm", "--limit", "2", "-j", "1", "--out", str(out), *more]


def test_eval_print_config_is_what_config_yaml_holds(tmp_path, data_dir, fakes):
    out = tmp_path / "run"
    printed = runner.invoke(app, _eval_args(data_dir, out, "--set", "agent_config.max_steps=3", "--print-config"))
    assert printed.exit_code == 0 and not out.exists()
    cfg = yaml.safe_load(printed.stdout)
    assert cfg["agent_config"]["max_steps"] == 3 and cfg["agent_config"]["top_k"] == 5  # defaults resolved
    assert runner.invoke(app, _eval_args(data_dir, out, "--set", "agent_config.max_steps=3")).exit_code == 0
    assert yaml.safe_load((out / "config.yaml").read_text()) == cfg


def test_embedded_model_gets_cpu_budgets_unless_set(tmp_path, data_dir, fakes):
    """--llm embedded: max_steps 4 and top_k 3 unless the user set them; other LLMs keep the agent's defaults."""
    def printed(*args):
        argv = _eval_args(data_dir, tmp_path / "run", *args, "--print-config")
        res = runner.invoke(app, argv)
        assert res.exit_code == 0, res.output
        return yaml.safe_load(res.stdout)["agent_config"]

    emb = printed("--llm", "embedded")
    assert (emb["max_steps"], emb["top_k"], emb["max_top_k"]) == (4, 3, 3)
    mine = printed("--llm", "embedded", "--set", "agent_config.max_steps=6", "--set", "agent_config.top_k=5")
    assert (mine["max_steps"], mine["top_k"], mine["max_top_k"]) == (6, 5, 3)
    remote = printed()  # --llm agent-llm
    assert (remote["max_steps"], remote["top_k"], remote["max_top_k"]) == (8, 5, 20)


@pytest.mark.parametrize("path,args", [
    ("synth ragshaper", ["--kb", "k", "--seeds", "2"]),
    ("synth evipath", ["--dataset", "d.jsonl"]),
    ("synth reasonrag", ["--dataset", "d.jsonl", "--kb", "k"]),
    ("synth tracer", ["--kb", "k"]),
    ("synth annotated", ["--dataset", "d.jsonl", "--kb", "k"]),
])
def test_synth_print_config_prints_every_key_and_exits_0(path, args):
    r = runner.invoke(app, [*path.split(), *args, "--set", "seed=7" if path != "synth annotated" else "top_k=7",
                            "--print-config"])
    assert r.exit_code == 0, r.output
    cfg = yaml.safe_load(r.stdout)
    assert isinstance(cfg, dict) and len(cfg) > 5
    assert cfg.get("seed", cfg.get("top_k")) == 7


def test_rerun_with_another_configuration_is_refused_showing_the_difference(tmp_path, data_dir, fakes):
    out = tmp_path / "run"
    assert runner.invoke(app, _eval_args(data_dir, out, "--set", "agent_config.max_steps=3")).exit_code == 0
    rows = (out / "results.jsonl").read_text()
    r = runner.invoke(app, _eval_args(data_dir, out, "--set", "agent_config.max_steps=5"))
    assert r.exit_code == 2
    assert "agent_config.max_steps: 3 -> 5" in r.output and "--force-new-config" in r.output
    assert (out / "results.jsonl").read_text() == rows  # nothing mixed in
    # more items and other concurrency are the same configuration: the run resumes
    more = _eval_args(data_dir, out, "--set", "agent_config.max_steps=3")
    more[more.index("--limit") + 1] = "3"
    assert runner.invoke(app, more).exit_code == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 3


def test_force_new_config_writes_beside_the_old_run(tmp_path, data_dir, fakes):
    out = tmp_path / "run"
    assert runner.invoke(app, _eval_args(data_dir, out, "--set", "agent_config.max_steps=3")).exit_code == 0
    before = (out / "config.yaml").read_text()
    r = runner.invoke(app, _eval_args(data_dir, out, "--set", "agent_config.max_steps=5", "--force-new-config"))
    assert r.exit_code == 0, r.output
    assert (out / "config.yaml").read_text() == before
    new = tmp_path / "run.2"
    assert yaml.safe_load((new / "config.yaml").read_text())["agent_config"]["max_steps"] == 5
    assert len((new / "results.jsonl").read_text().splitlines()) == 2
    # the same forced command again resumes run.2 instead of making run.3
    assert runner.invoke(app, _eval_args(data_dir, out, "--set", "agent_config.max_steps=5",
                                         "--force-new-config")).exit_code == 0
    assert not (tmp_path / "run.3").exists()


def test_a_run_written_before_defaults_were_resolved_resumes(tmp_path, data_dir, fakes):
    out = tmp_path / "run"
    assert runner.invoke(app, _eval_args(data_dir, out)).exit_code == 0
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    cfg["agent_config"] = {}  # what older releases wrote
    (out / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert runner.invoke(app, _eval_args(data_dir, out)).exit_code == 0


def test_config_diff_names_changed_keys_and_skips_allowed_ones():
    old = {"a": 1, "pairs": {"min_gap": 0.1}, "mcts": {"iterations": 4}, "limit": 2}
    new = {"a": 1, "pairs": {"min_gap": 0.5}, "mcts": {"iterations": 6}, "limit": 5}
    assert config_diff(old, new, ("limit", "pairs")) == ["mcts.iterations: 4 -> 6"]


def test_reasonrag_pair_settings_may_change_on_a_run_but_search_settings_may_not(tmp_path):
    from agentrag.cli.runconfig import run_dir_for
    from agentrag.cli.synth_reasonrag import REBUILT_KEYS
    from agentrag.config import dump_config
    from agentrag.synth.reasonrag.config import ReasonRagRunConfig

    cfg = ReasonRagRunConfig(dataset=["d.jsonl"], kb="k")
    (tmp_path / "config.yaml").write_text(dump_config(cfg))
    (tmp_path / "trees.jsonl").write_text('{"id": "q1"}\n')  # a finished search
    pairs = cfg.model_copy(update={"pairs": cfg.pairs.model_copy(update={"min_gap": 0.75})})
    assert run_dir_for(tmp_path, pairs, may_change=REBUILT_KEYS) == tmp_path
    search = cfg.model_copy(update={"mcts": cfg.mcts.model_copy(update={"iterations": 9})})
    with pytest.raises(Exception, match=re.escape("mcts.iterations: 6 -> 9")):
        run_dir_for(tmp_path, search, may_change=REBUILT_KEYS)
    assert json.loads(json.dumps(REBUILT_KEYS))  # plain keys, documented


def test_a_run_without_results_may_be_rerun_with_a_corrected_configuration(tmp_path):
    from agentrag.cli.runconfig import run_dir_for
    from agentrag.config import dump_config
    from agentrag.synth.reasonrag.config import ReasonRagRunConfig

    cfg = ReasonRagRunConfig(dataset=["d.jsonl"], kb="k", llm="openai:m@http://127.0.0.1:9/v1")
    (tmp_path / "config.yaml").write_text(dump_config(cfg))
    (tmp_path / "questions.jsonl").write_text('{"id": "q1"}\n')  # an input copy, not a result
    (tmp_path / "trees.jsonl").write_text("")
    fixed = cfg.model_copy(update={"llm": "openai:other@http://127.0.0.1:9/v1"})
    assert run_dir_for(tmp_path, fixed) == tmp_path
    (tmp_path / "trees.jsonl").write_text('{"id": "q1"}\n')
    with pytest.raises(Exception, match="another configuration"):
        run_dir_for(tmp_path, fixed)


def test_an_llm_endpoint_that_moved_is_the_same_configuration_another_model_is_not():
    old = {"llm": "openai:qwen@http://127.0.0.1:8000/v1", "judge": None}
    assert config_diff(old, {"llm": "openai:qwen@http://10.0.0.2:9000/v1", "judge": None}) == []
    assert config_diff(old, {"llm": "openai:llama@http://127.0.0.1:8000/v1", "judge": None}) == [
        "llm: 'openai:qwen@http://127.0.0.1:8000/v1' -> 'openai:llama@http://127.0.0.1:8000/v1'"]
