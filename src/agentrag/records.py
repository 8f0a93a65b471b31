"""Records that flow between stages, and their JSONL form.

Every record is a pydantic model; files of records are JSONL (one JSON object a line). Reading
a malformed line raises :class:`~agentrag.errors.UserError` naming the file, the line number and
the failing field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrag.errors import UserError, writing
from agentrag.paths import check_input_file

SCHEMA_VERSION = 1

R = TypeVar("R", bound=BaseModel)


class Record(BaseModel):
    """Base of all records: unknown fields are rejected, ``schema_version`` is carried along."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION


class Passage(Record):
    """A document of a knowledge base. ``contents`` is FlashRAG's ``"Title\\ntext"`` form."""

    id: str
    title: str = ""
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def contents(self) -> str:
        return f"{self.title}\n{self.text}" if self.title else self.text


class Hit(Record):
    """One retrieved passage: which passage, its score, the method and the KB it came from."""

    id: str
    title: str = ""
    text: str
    score: float
    method: str = "dense"
    kb: str = "main"
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def contents(self) -> str:
        return f"{self.title}\n{self.text}" if self.title else self.text


class ToolCall(Record):
    """A call of a tool by the model: ``arguments`` is the parsed JSON object."""

    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(Record):
    """An OpenAI-style chat message."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The message as the OpenAI chat API expects it (tool arguments as a JSON string)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": json.dumps(tc.arguments, ensure_ascii=False)},
                }
                for tc in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out


class Usage(Record):
    """Token accounting of one or more LLM calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            calls=self.calls + other.calls,
        )


class Provenance(Record):
    """Where a synthesized record came from."""

    stage: str
    model: str = ""
    prompt_hash: str = ""
    raw_output: str | None = None
    usage: Usage = Field(default_factory=Usage)


FinishReason = Literal["answered", "max_steps", "no_answer", "parse_error", "llm_error", "context_limit"]


class Step(Record):
    """One (thought, action, observation) step of a trajectory (RAGShaper Eq. 1)."""

    thought: str = ""
    action: ToolCall | None = None
    observation: str | None = None
    hits: list[Hit] = Field(default_factory=list)
    error: str | None = None
    raw: str | None = None
    #: a reasoning model's reasoning (the server's ``reasoning_content`` and/or the ``<think>``
    #: text removed before parsing); never part of ``thought`` or the answer
    reasoning: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency: float = 0.0


class Trajectory(Record):
    """A question, the agent's steps and its final answer."""

    id: str
    question: str
    steps: list[Step] = Field(default_factory=list)
    answer: str | None = None
    finish_reason: FinishReason = "answered"
    agent: str = ""
    model: str = ""
    usage: Usage = Field(default_factory=Usage)
    elapsed: float = 0.0
    messages: list[Message] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class QAItem(Record):
    """A question with its gold answers (FlashRAG's ``id, question, golden_answers, metadata``)."""

    id: str
    question: str
    golden_answers: list[str]
    metadata: dict[str, Any] = Field(default_factory=dict)
    hops: int | None = None
    supporting_passage_ids: list[str] = Field(default_factory=list)


class PreferencePair(Record):
    """A DPO pair: a shared prompt (chat messages) and a chosen and a rejected continuation."""

    id: str
    prompt: list[Message]
    chosen: list[Message]
    rejected: list[Message]
    metadata: dict[str, Any] = Field(default_factory=dict)


def _field_of(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<record>"
    return f"field {loc!r}: {first['msg']}"


def _load_object(line: str, path: str | os.PathLike[str], lineno: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{lineno}: invalid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(obj, dict):
        raise UserError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
    return obj


def parse_record(model: type[R], line: str, *, path: str | os.PathLike[str], lineno: int) -> R:
    """Parse one JSONL line into ``model``; a bad line raises UserError naming file:line and field."""
    obj = _load_object(line, path, lineno)
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise UserError(f"{path}:{lineno}: {model.__name__} {_field_of(exc)}") from exc


def iter_json_objects(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line; bad JSON or bytes raise UserError."""
    p = check_input_file(path)
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(f"{p}:{lineno}: not valid UTF-8 (byte {exc.start})") from exc
            if line.strip():
                yield lineno, _load_object(line, p, lineno)


def read_jsonl(path: str | os.PathLike[str], model: type[R]) -> Iterator[R]:
    """Read records of ``model`` from a JSONL file, failing clearly on the first bad line."""
    for lineno, obj in iter_json_objects(path):
        try:
            yield model.model_validate(obj)
        except ValidationError as exc:
            raise UserError(f"{path}:{lineno}: {model.__name__} {_field_of(exc)}") from exc


def dump_record(record: BaseModel) -> str:
    """One record as a compact JSON line (without the newline)."""
    return record.model_dump_json(exclude_none=False)


def write_jsonl(path: str | os.PathLike[str], records: Iterable[BaseModel]) -> int:
    """Write records to ``path`` atomically (temp file + rename); returns how many were written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    n = 0
    with writing(p, tmp):
        with tmp.open("w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(dump_record(rec) + "\n")
                n += 1
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    return n


__all__ = [
    "SCHEMA_VERSION",
    "Record",
    "Passage",
    "Hit",
    "ToolCall",
    "Message",
    "Usage",
    "Provenance",
    "Step",
    "Trajectory",
    "FinishReason",
    "QAItem",
    "PreferencePair",
    "parse_record",
    "iter_json_objects",
    "read_jsonl",
    "write_jsonl",
    "dump_record",
]
