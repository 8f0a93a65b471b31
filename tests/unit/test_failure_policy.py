"""The one failure policy: classify, run_stage, the run-directory lock, storage errors, typed output,
and the synthesizer driver's metrics and report."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field

from agentrag.config import Config
from agentrag.errors import (
    ContextLimitError,
    EndpointError,
    LLMError,
    ParseError,
    RetrievalError,
    RunLockedError,
    StorageError,
    UserError,
    classify,
)
from agentrag.exec import ThreadExecutor, run_stage
from agentrag.llm.structured import parse_structured, response_format
from agentrag.records import Message, QAItem
from agentrag.runs import JsonlStore, RunDir
from agentrag.synth.common import call_json
from agentrag.synth.driver import (
    PendingStage,
    Pipeline,
    Stage,
    SynthBugs,
    Synthesizer,
    SynthOutput,
    SynthRun,
    run_synthesizer,
)
from agentrag.testing import ScriptedLLM


@pytest.mark.parametrize(("exc", "kind"), [
    (EndpointError("401 from http://x/v1"), "fatal"),
    (StorageError("disk full"), "fatal"),
    (LLMError("HTTP 503", is_retryable=True), "outage"),
    (RetrievalError("refused", is_retryable=True), "outage"),
    (LLMError("HTTP 400 bad request", is_retryable=False), "fatal"),
    (ContextLimitError("9098 > 8192 tokens"), "model_limited"),
    (ConnectionError("reset by peer"), "outage"),
    (ConnectionRefusedError(111, "refused"), "outage"),
    (TimeoutError("read timed out"), "outage"),
    (httpx.ConnectError("refused"), "outage"),
    (httpx.ReadTimeout("slow"), "outage"),
    (OSError(errno.ENOSPC, "No space left on device", "/run/x.jsonl"), "fatal"),
    (ValueError("a bug"), "bug"),
    (KeyError("missing"), "bug"),
    (ParseError("bad JSON", is_retryable=False), "bug"),
])
def test_classify(exc: BaseException, kind: str) -> None:
    assert classify(exc) == kind


class Item(BaseModel):
    id: str


def _fn(item: Item) -> str:
    if item.id == "down":
        raise LLMError("HTTP 503 after 3 attempts", is_retryable=True)
    if item.id == "lost":
        raise ConnectionResetError("connection reset by peer")
    if item.id == "bug":
        raise ValueError("unexpected")
    if item.id == "401":
        raise EndpointError("HTTP 401 from http://llm/v1: check OPENAI_API_KEY")
    return item.id.upper()


@pytest.mark.parametrize("workers", [1, 3])
def test_run_stage_outage_and_bug_leave_items_unfinished(workers: int) -> None:
    written: dict[str, str] = {}
    items = [Item(id=i) for i in ("a", "down", "b", "bug", "lost", "c")]
    res = run_stage(ThreadExecutor(workers), _fn, items, stage="s",
                    on_result=lambda it, r: written.__setitem__(it.id, r))
    assert written == {"a": "A", "b": "B", "c": "C"}
    assert set(res.unfinished) == {"down", "lost"} and "LLMError" in res.unfinished["down"]
    assert set(res.bugs) == {"bug"} and res.done == 3 and res.total == 6


def test_run_stage_fatal_stops_at_once() -> None:
    written: list[str] = []
    seen: list[str] = []

    def fn(item: Item) -> str:
        seen.append(item.id)
        return _fn(item)

    items = [Item(id=i) for i in ("a", "401", "b", "c", "d")]
    with pytest.raises(EndpointError, match="401"):
        run_stage(ThreadExecutor(1), fn, items, on_result=lambda it, r: written.append(r))
    assert written == ["A"] and seen == ["a", "401"]  # nothing after the first fatal error ran


def test_run_stage_fatal_cancels_pending_items_on_threads() -> None:
    started: list[str] = []
    gate = threading.Event()

    def fn(item: Item) -> str:
        started.append(item.id)
        if item.id == "401":
            raise EndpointError("401")
        gate.wait(2)
        return item.id

    items = [Item(id="401")] + [Item(id=f"x{i}") for i in range(20)]
    with pytest.raises(EndpointError):
        run_stage(ThreadExecutor(2), fn, items)
    gate.set()
    assert len(started) <= 4  # at most 2 * workers were ever submitted


def test_run_dir_lock_names_the_other_process(tmp_path: Path) -> None:
    run = tmp_path / "run"
    script = textwrap.dedent(f"""
        import sys, time
        from agentrag.runs import RunDir
        RunDir({str(run)!r})
        print("locked", flush=True)
        time.sleep(30)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=rf"being written by process {proc.pid}"):
            RunDir(run)
        RunDir(run, lock=False)  # a reader is fine
    finally:
        proc.kill()
        proc.wait()
    with RunDir(run) as rd:  # the lock went with the process
        assert rd.path == run
    with RunDir(run), RunDir(run):  # re-entrant inside one process
        pass


def test_disk_full_is_a_storage_error_and_the_file_stays_readable(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = JsonlStore(tmp_path / "items.jsonl", Item)
    store.append(Item(id="a"))
    real_open = Path.open

    class Full:
        def __init__(self, fh: Any) -> None:
            self.fh = fh

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

        def tell(self) -> int:
            return int(self.fh.tell())

        def write(self, data: bytes) -> int:
            self.fh.write(data[:5])  # a torn partial line, then the disk is full
            self.fh.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def truncate(self, size: int) -> None:
            self.fh.truncate(size)

        def flush(self) -> None:
            self.fh.flush()

        def fileno(self) -> int:
            return int(self.fh.fileno())

    monkeypatch.setattr(Path, "open", lambda self, mode="r", *a, **k: Full(real_open(self, mode, *a, **k))
                        if mode == "ab" else real_open(self, mode, *a, **k))
    with pytest.raises(StorageError, match="No space left on device.*free some space, then rerun"):
        store.append(Item(id="b"))
    monkeypatch.undo()
    again = JsonlStore(tmp_path / "items.jsonl", Item)
    assert [r.id for r in again] == ["a"] and "b" not in again
    again.append(Item(id="b"))
    assert [r.id for r in JsonlStore(tmp_path / "items.jsonl", Item)] == ["a", "b"]


class Verdict(BaseModel):
    answer: str = Field(min_length=1, max_length=20)
    reasons: list[str] = Field(default_factory=list, max_length=2)


def test_structured_output_schema_and_validation() -> None:
    fmt = response_format(Verdict)
    schema = fmt["json_schema"]["schema"]
    assert fmt["json_schema"]["name"] == "verdict"
    assert schema["properties"]["answer"]["maxLength"] == 20 and "title" not in schema
    assert parse_structured('{"answer": "Paris"}', Verdict).answer == "Paris"
    for bad, field in (('{"answer": ""}', "answer"), ('{"answer": "x", "reasons": ["a", "b", "c"]}', "reasons"),
                       ('{"reasons": []}', "answer")):
        with pytest.raises(ParseError, match=f"field '{field}'"):
            parse_structured(bad, Verdict)


def test_call_json_validation_failure_is_data_and_outage_propagates() -> None:
    msgs = [Message(role="user", content="q")]
    obj, prov, err = call_json(ScriptedLLM(['{"answer": ""}']), msgs, Verdict, stage="t")
    assert obj is None and err is not None and err.startswith("parse_error") and prov.raw_output == '{"answer": ""}'
    obj, _, err = call_json(ScriptedLLM(['{"answer": "ok"}']), msgs, Verdict, stage="t")
    assert isinstance(obj, Verdict) and err is None

    class Down:
        model = "down"

        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        def chat(self, *a: Any, **k: Any) -> Any:
            raise self.exc

    with pytest.raises(LLMError):
        call_json(Down(LLMError("503", is_retryable=True)), msgs, Verdict, stage="t")  # type: ignore[arg-type]
    with pytest.raises(EndpointError):
        call_json(Down(EndpointError("401")), msgs, Verdict, stage="t")  # type: ignore[arg-type]
    obj, _, err = call_json(Down(ContextLimitError("9098 > 8192")), msgs, Verdict, stage="t")  # type: ignore[arg-type]
    assert obj is None and err is not None and err.startswith("context_limit")


class EchoConfig(Config):
    questions: list[str]


class Echo(Synthesizer[EchoConfig, list, Any]):
    """A one-stage synthesizer over QA items: the LLM answers each; 'down' and 'bug' items fail."""

    name = "echo"
    stages = (Stage("answer", "questions", "answers.jsonl", gates=("non-empty",)),)
    given = ("llm",)

    def check_inputs(self, cfg: EchoConfig, out: Any, given: Any) -> list:
        return [QAItem(id=q, question=q, golden_answers=["yes"]) for q in cfg.questions]

    def components(self, cfg: EchoConfig, run: RunDir, inputs: list, given: Any) -> Any:
        return given["llm"]

    def llm_roles(self, comps: Any) -> dict[str, Any]:
        return {"answerer": comps}

    def concurrency(self, cfg: EchoConfig) -> int:
        return 1

    def pipeline(self, ctx: SynthRun, cfg: EchoConfig, comps: Any, inputs: list) -> Pipeline:
        store = ctx.run.stage_file("answers", QAItem)

        def one(item: QAItem) -> QAItem:
            if item.id == "down":
                raise LLMError("HTTP 503", is_retryable=True)
            if item.id == "bug":
                raise ValueError("oops")
            text = comps.chat([Message(role="user", content=item.question)])[0].text
            return QAItem(id=item.id, question=item.question, golden_answers=[text])

        def report() -> SynthOutput:
            answers = store.read()
            return SynthOutput(counts={"answer": (len(inputs), len(answers), {})}, details={"answers": len(answers)})
        return Pipeline(steps=[PendingStage("answer", one, lambda: [i for i in inputs if i.id not in store],
                                            lambda _i, r: store.append(r))], report=report)

    def report_sections(self, metrics: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"title": "Echo", "text": f"{metrics['answers']} answers"}]


def test_driver_metrics_report_and_unfinished(tmp_path: Path) -> None:
    llm = ScriptedLLM(default="yes")
    out = tmp_path / "run"
    m = run_synthesizer(Echo(), EchoConfig(questions=["a", "down", "b"]), out, llm=llm)
    assert m["synthesizer"] == "echo" and m["answers"] == 2 and m["unfinished"] == 1
    assert m["unfinished_by_stage"] == {"answer": 1} and "down" in m["unfinished_items"]
    assert m["funnel"] == [{"stage": "answer", "input": "questions", "output": "answers.jsonl", "in": 3, "out": 2,
                            "rejected": {}, "unfinished": 1, "unit": "items"}]
    assert set(m["llm"]) == {"answerer"} and "wall_s" in m and m["bugs"] == 0
    assert json.loads((out / "metrics.json").read_text()) == json.loads(json.dumps(m, default=str))
    report = (out / "report.md").read_text()
    assert "LLM usage" in report and "Unfinished items" in report and "2 answers" in report
    with pytest.raises(SynthBugs, match="1 item"):
        run_synthesizer(Echo(), EchoConfig(questions=["a", "bug"]), tmp_path / "run2", llm=llm)
    assert json.loads((tmp_path / "run2" / "metrics.json").read_text())["bugs"] == 1


def test_driver_refuses_unknown_objects_before_writing(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"run_echo: unknown argument\(s\) retriever, tagger; the objects it takes: llm"):
        run_synthesizer(Echo(), EchoConfig(questions=["a"]), tmp_path / "run", llm=ScriptedLLM(default="x"),
                        tagger=None, retriever=None)
    assert not (tmp_path / "run").exists()
