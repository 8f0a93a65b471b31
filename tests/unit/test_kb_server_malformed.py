"""``kb serve`` answers every malformed /retrieve body with a 4xx and a one-line JSON error, never a
500: JSON nested past the parser's depth, values nested too deeply to show in a message, and a
seeded fuzz over JSON shapes and depths (fields of the request filled with random JSON values)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agentrag.kb.server import create_app
from agentrag.records import Passage
from agentrag.testing import FakeRetriever

PASSAGES = [Passage(id="p1", title="Everest", text="Everest is a mountain.")]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(FakeRetriever(PASSAGES), max_topk=10, max_queries=4, max_query_chars=50),
                      raise_server_exceptions=False)


def assert_client_error(resp: Any) -> None:
    assert 400 <= resp.status_code < 500, (resp.status_code, resp.text[:300])
    body = resp.json()
    assert set(body) == {"detail"} and isinstance(body["detail"], str)
    assert "\n" not in body["detail"] and len(body["detail"]) < 600 and "Traceback" not in body["detail"]


@pytest.mark.parametrize("depth", [100, 5_000, 100_000])
def test_deeply_nested_bodies_are_a_400(client, depth):
    for raw in ("[" * depth + "]" * depth, '{"queries": ' + "[" * depth + "]" * depth + "}",
                '{"topk": ' + '{"a":' * depth + "1" + "}" * depth + "}"):
        assert_client_error(client.post("/retrieve", content=raw.encode()))


@pytest.mark.parametrize("field", ["query", "queries", "topk", "top_k", "return_scores", "trajectory_id",
                                   "trajectory_ids"])
def test_a_value_nested_too_deeply_to_show_is_named_by_its_type(client, field):
    import sys

    depth = sys.getrecursionlimit() - 50  # readable by the JSON parser, too deep for repr()
    raw = '{"' + field + '": ' + "[" * depth + "]" * depth + "}"
    if field not in ("query", "queries"):
        raw = raw[:-1] + ', "queries": ["x"]}'
    assert_client_error(client.post("/retrieve", content=raw.encode()))


def _value(rng: random.Random, depth: int) -> Any:
    kinds = ["int", "float", "str", "bool", "null", "list", "dict", "bigint", "weird"]
    kind = rng.choice(kinds if depth < 6 else kinds[:5])
    if kind == "int":
        return rng.randint(-5, 20)
    if kind == "float":
        return rng.choice([0.5, -1.0, 1e308, 3.0])
    if kind == "str":
        return rng.choice(["", " ", "x" * 60, "Everest", "\u0000", "\ud800"[:0] + "é"])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "bigint":
        return 10 ** rng.randint(20, 5000)
    if kind == "weird":
        return rng.choice([[None], [[]], {"": {}}, ["x"] * 10])
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["a", "queries", "topk", "id"]): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def test_a_seeded_fuzz_over_json_shapes_never_gets_a_500(client):
    rng = random.Random(39)
    fields = ["query", "queries", "topk", "top_k", "return_scores", "trajectory_id", "trajectory_ids", "extra"]
    for _ in range(400):
        body: Any = {f: _value(rng, 0) for f in rng.sample(fields, rng.randint(0, len(fields)))}
        if rng.random() < 0.1:
            body = _value(rng, 0)
        try:
            raw = json.dumps(body).encode()
        except ValueError:  # an int too long for str(): send it as the digits
            raw = b'{"topk": ' + b"9" * 5000 + b"}"
        resp = client.post("/retrieve", content=raw)
        if resp.status_code == 200:
            continue
        assert_client_error(resp)
    for raw in (b"", b"\xff\xfe", b"nul", b'{"queries": ["a"]', b"{" * 10, b"\"\\ud800\""):
        assert_client_error(client.post("/retrieve", content=raw))
