"""``kb serve`` answers every malformed /retrieve body with a 4xx and a one-line JSON error, never a
500: JSON nested past the parser's depth, values nested too deeply to show in a message, and
hypothesis fuzz over JSON shapes (the request's fields filled with JSON values of any shape, or any
JSON value as the body) and over nesting depths."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


#: JSON scalars a client may send where the server expects something else
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
                    st.integers(min_value=10 ** 4300, max_value=10 ** 4400),  # past Python's int-to-str limit
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=80),
                    st.sampled_from(["", " ", "x" * 60, "Everest", "\u0000", "é", "\u2028"]))
#: JSON values of any shape, lists and objects nested a few levels
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=5),
    st.dictionaries(st.sampled_from(["a", "", "queries", "topk", "id", "document"]) | st.text(max_size=8),
                    inner, max_size=4)), max_leaves=25)
FIELDS = ["query", "queries", "topk", "top_k", "return_scores", "trajectory_id", "trajectory_ids", "extra"]
#: a request body: an object over the request's own fields (and others), or any JSON value
BODIES = st.one_of(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=len(FIELDS)), VALUES)


def _raw(body: Any) -> bytes:
    try:
        return json.dumps(body).encode()
    except ValueError:  # an int too long for str(): send it as the digits
        return b'{"topk": ' + b"9" * 5000 + b"}"


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(body=BODIES)
def test_a_fuzz_over_json_shapes_never_gets_a_500(client, body):
    resp = client.post("/retrieve", content=_raw(body))
    if resp.status_code != 200:
        assert_client_error(resp)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(min_value=1, max_value=50_000), opener=st.sampled_from(["[", '{"a":', '{"queries":']),
       field=st.sampled_from(FIELDS), leaf=st.sampled_from(["1", "null", '"x"', "[]", "{}"]))
def test_a_fuzz_over_nesting_depths_never_gets_a_500(client, depth, opener, field, leaf):
    closer = "]" if opener == "[" else "}"
    value = opener * depth + leaf + closer * depth
    for raw in (value, '{"' + field + '": ' + value + "}", '{"' + field + '": ' + value + ', "queries": ["x"]}'):
        resp = client.post("/retrieve", content=raw.encode())
        if resp.status_code != 200:
            assert_client_error(resp)


def test_bodies_that_are_not_json_are_a_400(client):
    for raw in (b"", b"\xff\xfe", b"nul", b'{"queries": ["a"]', b"{" * 10, b"\"\\ud800\""):
        assert_client_error(client.post("/retrieve", content=raw))
