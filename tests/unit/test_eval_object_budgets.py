"""run_eval(llm=<the embedded backend object>) runs with the CPU budgets the CLI gives
`--llm embedded` (the README's Python example passes an object); other objects get none."""

from __future__ import annotations

from agentrag.eval import EvalConfig
from agentrag.eval.defaults import EMBEDDED_AGENT_BUDGET, is_embedded, resolved_eval_config
from agentrag.llm.cache import CachedLLM
from agentrag.llm.embedded import EmbeddedLLM
from agentrag.testing import ScriptedLLM


def test_the_embedded_backend_object_gets_the_cli_budgets(tmp_path):
    backend = object.__new__(EmbeddedLLM)  # the class decides; no model is loaded for this check
    backend.model = "SmolLM2-135M-Instruct"
    cached = CachedLLM(backend, tmp_path / "c.sqlite")
    cfg = EvalConfig(dataset="d.jsonl", agent="react", llm="openai:m@http://127.0.0.1:9/v1")
    for obj in (backend, cached):
        assert is_embedded(obj)
        ac = resolved_eval_config(cfg, obj).agent_config
        assert all(ac[k] == v for k, v in EMBEDDED_AGENT_BUDGET.items())
    fake = ScriptedLLM([])
    assert not is_embedded(fake)
    ac = resolved_eval_config(EvalConfig(dataset="d.jsonl", agent="react", llm="embedded"), fake).agent_config
    assert ac["max_steps"] != EMBEDDED_AGENT_BUDGET["max_steps"]  # the object decides, not the config's default
    given = resolved_eval_config(cfg.model_copy(update={"agent_config": {"max_steps": 9}}), backend).agent_config
    assert given["max_steps"] == 9  # a value the user set wins
