"""Structured LLM output declared as pydantic models.

Every structured call declares a model (strings and lists with length bounds). The model gives
the JSON schema sent to the backend (``response_format`` of type ``json_schema``: grammar-
constrained decoding on the embedded backend, ``response_format`` on OpenAI-compatible servers)
and validates the reply: :func:`parse_structured` returns an instance or raises
:class:`~agentrag.errors.ParseError` naming the first invalid field. No dict schemas, no ``.get``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentrag.errors import ParseError
from agentrag.llm.parsing import parse_json_output

M = TypeVar("M", bound=BaseModel)


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model`` as sent to backends (no titles; refs inlined by pydantic); a
    new dict each call (the caller may change it), built once per model class (pydantic's schema
    generation costs more client CPU than the request that carries it)."""
    schema: dict[str, Any] = json.loads(_schema_text(model))
    return schema


@functools.lru_cache(maxsize=512)
def _schema_text(model: type[BaseModel]) -> str:
    schema = model.model_json_schema()
    _drop_titles(schema)
    return json.dumps(schema)


def _drop_titles(node: Any) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("title"), str):
            node.pop("title")
        for v in node.values():
            _drop_titles(v)
    elif isinstance(node, list):
        for v in node:
            _drop_titles(v)


def response_format(model: type[BaseModel], name: str | None = None) -> dict[str, Any]:
    """The OpenAI ``response_format`` dict of ``model``."""
    return {"type": "json_schema", "json_schema": {"name": name or _snake(model.__name__), "strict": True,
                                                   "schema": json_schema(model)}}


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def validate_structured(obj: Any, model: type[M]) -> M:
    """``obj`` (a decoded JSON value) as ``model``; a :class:`ParseError` names the first bad field."""
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        raise ParseError(f"{model.__name__}: field {where!r}: {err.get('msg')} "
                         f"({exc.error_count()} error(s))") from exc


def parse_structured(text: str | None, model: type[M]) -> M:
    """The JSON object in ``text`` validated as ``model`` (:class:`ParseError` when it is not one)."""
    return validate_structured(parse_json_output(text), model)


__all__ = ["json_schema", "response_format", "parse_structured", "validate_structured"]
