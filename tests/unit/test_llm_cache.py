"""CachedLLM: identical reruns make zero backend calls; keys cover the whole request."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentrag.errors import LLMError, UserError
from agentrag.llm import CachedLLM, resolve_llm
from agentrag.llm.base import Completion
from agentrag.records import Message, ToolCall
from agentrag.testing import ScriptedLLM, StubOpenAIServer

MSGS = [Message(role="user", content="capital of France?")]


def run(llm) -> list[str | None]:
    out = []
    for q in ["a", "b", "c"]:
        out.extend(c.text for c in llm.chat([Message(role="user", content=q)], temperature=0.0))
    return out


def test_second_identical_run_makes_zero_backend_calls(tmp_path: Path) -> None:
    first = ScriptedLLM(default="x", cycle=False, script=["1", "2", "3"])
    assert run(CachedLLM(first, tmp_path / "c.sqlite")) == ["1", "2", "3"]
    second = ScriptedLLM(default="DIFFERENT")
    cached = CachedLLM(second, tmp_path / "c.sqlite")  # fresh process-like wrapper, same file
    assert run(cached) == ["1", "2", "3"]
    assert second.calls == 0
    assert cached.stats()["hits"] == 3 and cached.stats()["misses"] == 0


def test_key_includes_sampling_tools_format_and_model(tmp_path: Path) -> None:
    inner = ScriptedLLM(default="y")
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    llm.chat(MSGS, temperature=0.0)
    llm.chat(MSGS, temperature=0.5)
    llm.chat(MSGS, temperature=0.0, tools=[{"type": "function", "function": {"name": "t"}}])
    llm.chat(MSGS, temperature=0.0, response_format={"type": "json_object"})
    assert inner.calls == 4
    llm.chat(MSGS, temperature=0.0)
    assert inner.calls == 4
    other = CachedLLM(ScriptedLLM(default="z", model="other"), tmp_path / "c.sqlite")
    assert other.chat(MSGS, temperature=0.0)[0].text == "z"


def test_sample_index_and_tool_calls_roundtrip(tmp_path: Path) -> None:
    inner = ScriptedLLM(["s0", "s1", ToolCall(name="search", arguments={"q": 1}), "s3"])
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    assert [c.text for c in llm.chat(MSGS, n=2)] == ["s0", "s1"]
    out = llm.chat(MSGS, n=4)  # indices 0,1 from the cache, 2,3 fresh
    assert [c.text for c in out[:2]] == ["s0", "s1"]
    assert out[2].tool_calls[0].arguments == {"q": 1} and out[3].text == "s3"
    assert inner.calls == 2
    again = CachedLLM(ScriptedLLM(), tmp_path / "c.sqlite").chat(MSGS, n=4)
    assert [c.model_dump() for c in again] == [c.model_dump() for c in out]


def _in_threads(work: Any, n: int) -> None:
    """``work(i)`` for i in 0..n-1, each in its own thread, all joined."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_threads_share_the_cache_safely(tmp_path: Path) -> None:
    inner = ScriptedLLM(default="t")
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(20):
                llm.chat([Message(role="user", content=f"q{j % 5}")])
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    _in_threads(work, 4)
    assert not errors
    assert len(llm.cache) == 5
    assert llm.stats()["hits"] + llm.stats()["misses"] == 80


def test_errors_are_not_cached(tmp_path: Path) -> None:
    from agentrag.errors import LLMError
    inner = ScriptedLLM([LLMError("boom"), "ok"])
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    with pytest.raises(LLMError):
        llm.chat(MSGS)
    assert llm.chat(MSGS)[0].text == "ok"


def test_resolve_llm_cache_switch(tmp_path: Path) -> None:
    cfg = tmp_path / "llm.yaml"
    cfg.write_text("backend: openai\nmodel: m\nbase_url: http://127.0.0.1:1/v1\ncache: false\n")
    assert not isinstance(resolve_llm(str(cfg), cache=tmp_path / "c.sqlite"), CachedLLM)
    assert isinstance(resolve_llm("openai:m", cache=tmp_path / "c.sqlite"), CachedLLM)
    assert not isinstance(resolve_llm("openai:m"), CachedLLM)


def test_corrupt_cache_file_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "c.sqlite"
    bad.write_text("not a database at all" * 100)
    with pytest.raises(UserError, match="c.sqlite"):
        CachedLLM(ScriptedLLM(), bad)


def _worker(path: str, tag: str) -> list[str | None]:
    llm = CachedLLM(ScriptedLLM(default=tag), path)
    return [llm.chat([Message(role="user", content=f"q{j % 6}")])[0].text for j in range(30)]


def test_processes_share_one_cache_file(tmp_path: Path) -> None:
    import multiprocessing as mp

    path = str(tmp_path / "c.sqlite")
    with mp.get_context("spawn").Pool(2) as pool:
        a, b = pool.starmap(_worker, [(path, "A"), (path, "B")])
    # whichever process wrote a key first, both processes return its answer, on every call
    final = CachedLLM(ScriptedLLM(), path)
    assert len(final.cache) == 6
    stored = [final.chat([Message(role="user", content=f"q{j}")])[0].text for j in range(6)]
    assert set(stored) <= {"A", "B"}
    assert a == b == [stored[j % 6] for j in range(30)]


def _open_and_write(path: str, start, i: int) -> None:
    from agentrag.llm.cache import ResponseCache

    start.wait()  # every process opens the new file at the same moment (Ray workers starting together)
    cache = ResponseCache(path)
    cache.put(f"k{i}", "m", {0: ScriptedLLM(default=str(i)).chat(MSGS)[0]})
    cache.close()


def test_processes_opening_a_new_cache_together_all_succeed(tmp_path: Path) -> None:
    import multiprocessing as mp

    from agentrag.llm.cache import ResponseCache

    ctx = mp.get_context("fork")
    for attempt in range(5):  # the race is a window of microseconds: open the same new file 5 times
        path = str(tmp_path / f"c{attempt}.sqlite")
        start = ctx.Barrier(8)
        procs = [ctx.Process(target=_open_and_write, args=(path, start, i)) for i in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 8
        assert len(ResponseCache(path)) == 8


def _stored(db: Path) -> list[Completion]:
    """Every completion in the cache file."""
    with closing(sqlite3.connect(db)) as con:
        return [Completion.model_validate_json(v) for (v,) in con.execute("SELECT value FROM responses")]


def _stub_llm(url: str, cache: Path, retries: int) -> CachedLLM:
    llm = resolve_llm(f"openai:stub@{url}", cache=cache, api_key="k", max_retries=retries,
                      backoff_initial=0.01, backoff_max=0.02, timeout=5)
    assert isinstance(llm, CachedLLM)
    return llm


@pytest.mark.parametrize("kind", ["content_null", "empty_message", "usage_str", "tool_args_list"])
def test_malformed_completion_is_never_cached(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "c.sqlite"
    with StubOpenAIServer([kind], reply="good") as srv:  # bad body, then the good one on retry
        assert [c.text for c in _stub_llm(srv.base_url, db, retries=1).chat(MSGS)] == ["good"]
        assert srv.requests == 2
    assert [c.text for c in _stored(db)] == ["good"]
    with StubOpenAIServer(reply="other") as srv:  # the rerun is served the good answer from the cache
        assert _stub_llm(srv.base_url, db, retries=0).chat(MSGS)[0].text == "good" and srv.requests == 0


def test_retries_exhausted_caches_nothing_and_a_rerun_calls_again(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    with StubOpenAIServer(["content_null"] * 2) as srv:
        llm = _stub_llm(srv.base_url, db, retries=1)
        with pytest.raises(LLMError) as info:
            llm.chat(MSGS)
        assert info.value.is_retryable and srv.requests == 2
    assert _stored(db) == []
    with StubOpenAIServer(reply="healthy") as srv:
        again = _stub_llm(srv.base_url, db, retries=0)
        assert again.chat(MSGS)[0].text == "healthy" and srv.requests == 1 and again.inner_calls == 1
    assert [c.text for c in _stored(db)] == ["healthy"]


def test_many_threads_each_read_their_own_write_and_every_reply_is_kept(tmp_path: Path) -> None:
    """Group commits: 32 threads writing at once; a put returns only once its row is readable, by
    a lookup on another connection and by a new cache object (another process's view)."""
    from agentrag.llm.base import Completion
    from agentrag.llm.cache import ResponseCache

    cache = ResponseCache(tmp_path / "c.sqlite")
    errors: list[str] = []
    start = threading.Barrier(32)

    def work(i: int) -> None:
        start.wait()
        for j in range(10):
            key = f"k{i}-{j}"
            cache.put(key, "m", {0: Completion(text=key)})
            if cache.get(key, 1).get(0) is None or cache.get(key, 1)[0].text != key:
                errors.append(key)

    _in_threads(work, 32)
    assert errors == []
    other = ResponseCache(tmp_path / "c.sqlite")
    assert len(other) == 320 and other.get("k31-9", 1)[0].text == "k31-9"
    cache.close()
    other.close()
