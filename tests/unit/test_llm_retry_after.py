"""A 429/503 with ``Retry-After`` (seconds or an HTTP date) is honoured, capped by
``retry_after_max``; the endpoint's request limit holds every request until then (the stub in
agentrag.testing sends the header)."""

from __future__ import annotations

import threading
import time

import pytest

from agentrag.llm import OpenAIBackend
from agentrag.llm.openai_wire import retry_after_seconds
from agentrag.records import Message
from agentrag.testing import StubOpenAIServer

pytestmark = pytest.mark.timeout(60)

MSGS = [Message(role="user", content="hi")]


def backend(url: str, **kw) -> OpenAIBackend:
    settings = {"timeout": 2, "max_retries": 2, "backoff_initial": 0.01, "backoff_max": 0.02, **kw}
    return OpenAIBackend("stub-model", base_url=url, api_key="k", **settings)


def test_retry_after_header_forms() -> None:
    now = 1_700_000_000.0
    from email.utils import formatdate

    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 0.5 ") == 0.5
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now=now) == 0.0  # in the past: no wait
    for bad in (None, "", "soon", "nan", "inf", "-"):
        assert retry_after_seconds(bad) in (None, 0.0), bad
    assert retry_after_seconds("-5") == 0.0


@pytest.mark.parametrize("fault", ["429@1", "503@1", "429@date+2"])
def test_the_retry_waits_what_the_server_asked(fault: str) -> None:
    with StubOpenAIServer([fault], reply="hello") as srv:
        assert backend(srv.base_url).chat(MSGS)[0].text == "hello"
        gap = srv.times[1] - srv.times[0]
    # the backoff alone is 0.01-0.02 s; an HTTP date has whole seconds (date+2 is 1-2 s from now)
    assert 0.9 <= gap < 3.5, gap


def test_a_retry_after_over_the_ceiling_is_cut_to_it() -> None:
    with StubOpenAIServer(["429@3600"], reply="hello") as srv:
        start = time.monotonic()
        assert backend(srv.base_url, retry_after_max=0.5).chat(MSGS)[0].text == "hello"
        assert 0.45 <= srv.times[1] - srv.times[0] < 2 and time.monotonic() - start < 3


def test_without_the_header_the_backoff_decides() -> None:
    with StubOpenAIServer(["429"], reply="hello") as srv:
        backend(srv.base_url).chat(MSGS)
        assert srv.times[1] - srv.times[0] < 0.5


def test_every_request_to_the_endpoint_waits_for_the_retry_after() -> None:
    """A second thread's request does not reach the server while the first one's Retry-After runs."""
    with StubOpenAIServer(["429@1"], reply="hello") as srv:
        llm = backend(srv.base_url)
        first = threading.Thread(target=llm.chat, args=(MSGS,))
        first.start()
        while srv.requests < 1:
            time.sleep(0.005)
        time.sleep(0.1)  # the 429 is answered
        llm.chat(MSGS)
        first.join()
        assert srv.requests == 3
        assert min(srv.times[1:]) - srv.times[0] >= 0.9  # nothing was sent during the wait


def test_a_truncated_body_is_retried_like_any_outage() -> None:
    from agentrag.errors import LLMError, classify

    with StubOpenAIServer(["truncated"], reply="hello") as srv:
        assert backend(srv.base_url).chat(MSGS)[0].text == "hello"
        assert srv.requests == 2
    with StubOpenAIServer(["truncated"] * 3, reply="hello") as srv, pytest.raises(LLMError) as err:
        backend(srv.base_url).chat(MSGS)
    assert classify(err.value) == "outage"
