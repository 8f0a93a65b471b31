from __future__ import annotations

import pytest

from agentrag.config import Config, load_config
from agentrag.errors import UserError


class Retrieval(Config):
    top_k: int = 5
    threshold: float | None = None
    method: str = "dense"


class Demo(Config):
    name: str = "x"
    retrieval: Retrieval = Retrieval()
    flags: list[str] = []


def test_typo_lists_valid_keys_and_closest(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("retrieval:\n  topk: 3\n")
    with pytest.raises(UserError) as exc:
        load_config(Demo, cfg)
    msg = str(exc.value)
    assert "retrieval.topk" in msg
    assert "did you mean 'top_k'" in msg
    assert "method, threshold, top_k" in msg


def test_top_level_typo():
    with pytest.raises(UserError, match="unknown key 'nmae'.*did you mean 'name'"):
        load_config(Demo, None, ["nmae=y"])


def test_set_overrides_nested_with_type(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("retrieval:\n  top_k: 3\n  method: bm25\n")
    c = load_config(Demo, cfg, ["retrieval.top_k=7", "retrieval.threshold=0.25", "flags=[a, b]"])
    assert c.retrieval.top_k == 7 and isinstance(c.retrieval.top_k, int)
    assert c.retrieval.threshold == 0.25
    assert c.retrieval.method == "bm25"
    assert c.flags == ["a", "b"]


def test_wrong_type_names_field():
    with pytest.raises(UserError, match=r"retrieval.top_k.*'many'"):
        load_config(Demo, None, ["retrieval.top_k=many"])


def test_bad_set_syntax_and_missing_file(tmp_path):
    with pytest.raises(UserError, match="KEY=VALUE"):
        load_config(Demo, None, ["retrieval.top_k"])
    with pytest.raises(UserError, match="not found"):
        load_config(Demo, tmp_path / "nope.yaml")
