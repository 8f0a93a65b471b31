"""Typed configuration: pydantic models with ``extra="forbid"``, loaded from YAML and
overridden with ``--set a.b=c`` (values parsed as YAML scalars, so ``3`` is an int and
``true`` a bool). A typo'd key fails at load time listing the valid keys and the closest match.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from agentrag.errors import UserError
from agentrag.paths import check_input_file

C = TypeVar("C", bound="Config")


class Config(BaseModel):
    """Base of every config section: unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    #: where the values came from ("FILE", "FILE + --set", "defaults"), for errors about nested
    #: keys checked later (:func:`config_source`)
    _source: str = PrivateAttr(default="defaults")


def config_source(config: BaseModel) -> str:
    """Where ``config``'s values came from ("FILE", "FILE + --set", "defaults"): what
    :func:`load_config` was given."""
    return str(getattr(config, "_source", None) or "defaults")


def parse_override(item: str) -> tuple[list[str], Any]:
    """Split ``a.b=c`` into ``(["a", "b"], value)`` with ``value`` parsed as a YAML scalar."""
    if "=" not in item:
        raise UserError(f"--set {item!r}: expected KEY=VALUE, e.g. --set retrieval.top_k=5")
    key, _, raw = item.partition("=")
    parts = [p for p in key.strip().split(".")]
    if not all(parts):
        raise UserError(f"--set {item!r}: empty key segment in {key!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides to a nested dict (new dicts are created along the path)."""
    for item in overrides:
        parts, value = parse_override(item)
        node = data
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = {}
                node[p] = nxt
            node = nxt
        node[parts[-1]] = value
    return data


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The sub-model that owns the field at ``loc`` (for listing valid keys)."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None or not isinstance(part, str) or part not in current.model_fields:
            return current
        ann = current.model_fields[part].annotation
        current = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return current


def _explain(model: type[BaseModel], exc: ValidationError, source: str, prefix: str = "") -> str:
    lines = []
    for err in exc.errors():
        loc = [p for p in err["loc"]]
        dotted = prefix + ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            owner = _model_at(model, loc[:-1])
            valid = sorted(owner.model_fields) if owner else []
            close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            lines.append(f"unknown key {dotted!r}{hint} valid keys here: {', '.join(valid)}")
        else:
            lines.append(f"{dotted}: {err['msg']} (got {err.get('input')!r})")
    return f"invalid config ({source}):\n  " + "\n  ".join(lines)


def load_config(
    model: type[C],
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    base: dict[str, Any] | None = None,
    *,
    source: str | None = None,
    prefix: str = "",
) -> C:
    """Build ``model`` from ``base`` (CLI-level values), then a YAML file, then ``--set`` overrides.

    An error names the source of the values (the file, ``--set``; ``source`` when the values were
    read elsewhere, e.g. a section of another config) and each key in full (``prefix`` + its path,
    e.g. ``agent_config.max_steps``)."""
    data: dict[str, Any] = dict(base or {})
    source = source or "defaults"
    if path is not None:
        p = check_input_file(path, "config file")
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise UserError(f"{p}: not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise UserError(f"{p}: the top level must be a mapping of keys to values")
        data = _deep_merge(data, loaded)
        source = str(p)
    if overrides:
        data = apply_overrides(data, overrides)
        source += " + --set"
    try:
        config = model.model_validate(data)
    except ValidationError as exc:
        raise UserError(_explain(model, exc, source, prefix)) from exc
    config._source = source
    return config


def _deep_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def dump_config(config: BaseModel) -> str:
    """The fully resolved config as YAML."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


__all__ = ["Config", "config_source", "load_config", "apply_overrides", "parse_override", "dump_config"]
