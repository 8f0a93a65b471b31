"""The one protocol parser: what a model's turn says, for every agent, teacher and the ReasonRAG MCTS.

Tag turns (:func:`parse_turn`). A protocol names its tags: *ending* actions (a ``<query>``,
``<search>``, ``<answer>``, ``<action>``: the turn's step ends at the first closing tag of the one it
opened) and *inner* tags (``<evidence>``, ``<think>``, ``<select>``: segments a step may hold before
its action). The rules, the same for every protocol:

- the step ends at the first closing tag of the ending action it opened; text after it is not part
  of the step (it stays in ``raw`` only); with no ending action the step ends at the close of its
  first inner action (``evidence``) and otherwise is the whole output (an untagged turn);
- an action tag written in another case (``<ANSWER>``, ``</Answer>``), a closing tag with no
  opening, an opening tag inside an open one (nested or two opened at once), a close of another
  tag than the open one, an action opened and never closed, and an ``<answer>`` followed by
  another ending action in the same turn make a **malformed** turn: no action, a named reason
  (:data:`MALFORMED`), never a query or an answer;
- a tag named in ``closed_by_stop`` (the request's stop sequence, e.g. ``</query>``, which servers
  do not return) that is open at the very end of an output that stopped (not cut by the token
  limit) is closed there.

Tool calls written as text (:func:`parse_tool_calls`): ``<tool_call>{json}</tool_call>`` blocks
(hermes) or a reply that is one JSON object naming a tool. One parser for the backends (which turn
text into ``Completion.tool_calls`` when a server has no tool parser) and for the agents.

Control tokens (:func:`neutralize_control_tokens`): chat-template special tokens (``<|im_start|>``,
``<|im_end|>``, ``<|endoftext|>``, any ``<|...|>``, ``<s>``/``</s>``, and the turn markers of other
template families) inside documents and observations are written so no tokenizer reads them as
special tokens; :func:`neutralize_tags` also escapes the protocol tags, so a document can neither
forge a turn nor open an action.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrag.records import Message, ToolCall

# -- control tokens and protocol tags inside documents ---------------------------------------------

#: special tokens of chat templates: ChatML / Qwen / Phi (``<|im_start|>``, ``<|endoftext|>``, any
#: ``<|...|>``), Llama 2 / Mistral (``<s>``, ``</s>``, ``[INST]``, ``<<SYS>>``), Gemma
#: (``<start_of_turn>``, ``<end_of_turn>``), and the StarCoder family SmolLM2's tokenizer holds
CONTROL_TOKEN_RE = re.compile(
    r"<\|[^<>|\n]{0,64}\|>"
    r"|<\s*/?\s*s\s*>"
    r"|\[\s*/?\s*INST\s*\]|<<\s*/?\s*SYS\s*>>"
    r"|<\s*(?:start_of_turn|end_of_turn|bos|eos|pad|unk|repo_name|reponame|file_sep|filename|gh_stars"
    r"|issue_start|issue_comment|issue_closed|jupyter_start|jupyter_text|jupyter_code|jupyter_output"
    r"|empty_output|commit_before|commit_msg|commit_after|fim_prefix|fim_middle|fim_suffix|fim_pad)\s*>",
    re.IGNORECASE)

#: the tags the tag-based protocols parse from model output (reason_ground, search_r1, react answers,
#: planner_executor's planner and executor, hermes tool calls)
PROTOCOL_TAGS = ("answer", "search", "information", "think", "query", "evidence", "tool_call", "tool_response",
                 "action", "select")
_PROTOCOL_TAG_RE = re.compile(r"<\s*(/?)\s*(" + "|".join(PROTOCOL_TAGS) + r")\s*>", re.IGNORECASE)
#: the text-answer marker plan_step parses (``Final_Answer: X``, ``Final Answer: X``)
_ANSWER_MARKER_RE = re.compile(r"(Final[_ ]Answer\**\s*)([:：])", re.IGNORECASE)


def neutralize_control_tokens(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every chat-template control token (:data:`CONTROL_TOKEN_RE`, plus the literal
    tokens in ``extra``, e.g. a tokenizer's own special tokens) written with ``&lt;``/``&gt;``
    (``[``/``]`` as ``&#91;``/``&#93;``), so no tokenizer reads it as a special token and a document
    cannot end a turn or open one. Everything else is left verbatim."""
    text = CONTROL_TOKEN_RE.sub(lambda m: _escape(m.group(0)), text)
    for token in extra:
        if token and token in text and not token.isalnum():
            text = text.replace(token, _escape(token))
    return text


def _escape(token: str) -> str:
    return token.replace("<", "&lt;").replace(">", "&gt;").replace("[", "&#91;").replace("]", "&#93;")


def neutralize_messages(messages: Sequence[Message], extra: Iterable[str] = ()) -> list[Message]:
    """``messages`` with the control tokens in every content neutralised
    (:func:`neutralize_control_tokens`; ``extra``: a tokenizer's own special tokens, protocol tags
    such as ``<tool_call>`` among them excepted): what every backend sends, so no text (a document, an
    observation, a question) can forge a turn whatever the agent did with it. A message whose
    content has none is passed on as it is."""
    extra = tuple(t for t in extra if not _PROTOCOL_TAG_RE.fullmatch(t))  # a template's own <tool_call> stays
    out = []
    for m in messages:
        content = m.content
        clean = neutralize_control_tokens(content, extra) if content else content
        out.append(m if clean == content else m.model_copy(update={"content": clean}))
    return out


def neutralize_tags(text: str) -> str:
    """``text`` with its control tokens neutralised (:func:`neutralize_control_tokens`), every
    protocol tag (``<answer>``, ``</information>``, ``<query>`` ...) written as ``&lt;answer&gt;``
    etc., and the colon of a ``Final_Answer:`` marker as ``&#58;``, so a retrieved document cannot
    forge a turn, open or close a protocol segment, or state a final answer. Everything else is
    left verbatim."""
    text = neutralize_control_tokens(text)
    text = _PROTOCOL_TAG_RE.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}&gt;", text)
    return _ANSWER_MARKER_RE.sub(lambda m: f"{m.group(1)}&#58;", text)


# -- tag turns -----------------------------------------------------------------------------------

#: the named reasons of a malformed turn
MALFORMED = ("unclosed_tag", "miscased_tag", "nested_tag", "mismatched_tag", "unopened_tag", "action_after_answer")

_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z_]+)\s*>")
_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)


@dataclass(frozen=True)
class Segment:
    """One closed tag pair of a turn: its tag, its content (stripped) and where it ends."""

    tag: str
    content: str
    start: int
    end: int


@dataclass(frozen=True)
class ParsedTurn:
    """A model turn under a tag protocol (module docstring): the action it takes (``None`` for an
    untagged or malformed turn) and its content, the step (``text``: the output up to the action's
    first closing tag), the closed segments inside the step, the uncut output (``raw``), and why
    the turn is malformed (``malformed``: ``"<reason>: <detail>"``, the reason one of
    :data:`MALFORMED`)."""

    action: str | None
    content: str | None
    text: str
    raw: str
    segments: tuple[Segment, ...] = ()
    malformed: str | None = None
    closed_by_stop: bool = False
    end: int = 0

    @property
    def lead(self) -> str:
        """The text before the first tag of the turn (a malformed turn's only usable part: the
        thought it started with; nothing of its tags or what follows them)."""
        first = self.segments[0].start if self.segments else None
        m = _TAG.search(self.raw)
        cut = min(x for x in (first, m.start() if m else None, len(self.raw)) if x is not None)
        return self.raw[:cut].strip()

    @property
    def reason(self) -> str | None:
        """The malformed turn's reason (one of :data:`MALFORMED`), else ``None``."""
        return self.malformed.split(":", 1)[0] if self.malformed else None

    def first(self, tag: str) -> str | None:
        """The content of the step's first closed ``<tag>`` segment, else ``None``."""
        return next((s.content for s in self.segments if s.tag == tag), None)


@dataclass
class _Scan:
    segments: list[Segment] = field(default_factory=list)
    malformed: str | None = None
    end: int | None = None  # where the step ends (the ending action's close), None: not reached
    closed_by_stop: bool = False


def parse_turn(text: str, *, actions: Collection[str], inner: Collection[str] = (), fallback: str | None = None,
               closed_by_stop: Collection[str] = (), stopped: bool = True, blank_think: bool = False,
               answer_ends_turn: bool = False) -> ParsedTurn:
    """Parse one model output under a tag protocol (rules in the module docstring).

    ``actions``: the ending action tags (the step ends at the first closing tag of the one opened);
    ``inner``: tags that may appear in a step before its action (checked for well-formedness);
    ``fallback``: an inner tag that is the turn's action when no ending action is taken (e.g.
    ``evidence``: the step then ends at its first closing tag);
    ``closed_by_stop``: action tags whose closing tag is the request's stop sequence (an output that
    ``stopped`` with one open at its end had it cut off by the server); ``blank_think``: text inside
    ``<think>`` blocks is not parsed (it may quote tags), for protocols whose thoughts are tagged;
    ``answer_ends_turn``: the first ``</answer>`` ends the turn and whatever follows it is ignored
    (kept in ``raw``), another action included (Search-R1's released rule), instead of making the
    turn malformed (``action_after_answer``)."""
    raw = text
    visible = _THINK_BLOCK.sub(lambda m: " " * len(m.group(0)), text) if blank_think else text
    known = {t.lower() for t in (*actions, *inner)}
    scan = _scan(visible, known, set(actions), set(closed_by_stop) if stopped else set())
    if scan.malformed is None and scan.end is not None:
        last = scan.segments[-1]
        if last.tag == "answer" and not answer_ends_turn:
            after = _first_open(visible, scan.end, set(actions))
            if after is not None:
                scan.malformed = f"action_after_answer: <{after}> after the closed <answer>"
    if scan.malformed is not None:
        return ParsedTurn(None, None, text.strip(), raw, tuple(scan.segments), scan.malformed, end=len(text))
    step = (text + f"</{scan.segments[-1].tag}>") if scan.closed_by_stop else text
    if scan.end is not None:
        last = scan.segments[-1]
        return ParsedTurn(last.tag, last.content, step[:scan.end].strip(), raw, tuple(scan.segments),
                          closed_by_stop=scan.closed_by_stop, end=scan.end)
    for seg in scan.segments:
        if seg.tag == fallback:
            return ParsedTurn(seg.tag, seg.content, text[:seg.end].strip(), raw,
                              tuple(s for s in scan.segments if s.end <= seg.end), end=seg.end)
    return ParsedTurn(None, None, text.strip(), raw, tuple(scan.segments), end=len(text))


def _first_open(text: str, pos: int, tags: set[str]) -> str | None:
    """The first tag of ``tags`` opened (in any case) at or after ``pos``."""
    for m in _TAG.finditer(text, pos):
        if not m.group(1) and m.group(2).lower() in tags:
            return m.group(2)
    return None


def _scan(text: str, known: set[str], ending: set[str], stop_tags: set[str]) -> _Scan:
    """Walk the protocol's tags left to right until the first close of an ending action."""
    out = _Scan()
    open_tag: tuple[str, int, int] | None = None  # (tag, start and end of its opening tag)
    for m in _TAG.finditer(text):
        closing, name = bool(m.group(1)), m.group(2)
        low = name.lower()
        if low not in known:
            continue
        written = m.group(0)
        exact = written == (f"</{low}>" if closing else f"<{low}>")
        if not exact:
            out.malformed = f"miscased_tag: {written!r} (the protocol's tags are lower case, no spaces)"
            return out
        if not closing:
            if open_tag is not None:
                out.malformed = f"nested_tag: <{low}> opened inside the open <{open_tag[0]}>"
                return out
            open_tag = (low, m.start(), m.end())
            continue
        if open_tag is None:
            out.malformed = f"unopened_tag: </{low}> closes no open tag"
            return out
        if open_tag[0] != low:
            out.malformed = f"mismatched_tag: </{low}> closes the open <{open_tag[0]}>"
            return out
        out.segments.append(Segment(low, text[open_tag[2]:m.start()].strip(), open_tag[1], m.end()))
        open_tag = None
        if low in ending:
            out.end = m.end()
            return out
    if open_tag is not None:
        tag, start, body_start = open_tag
        if tag in stop_tags:
            out.segments.append(Segment(tag, text[body_start:].strip(), start, len(text) + len(f"</{tag}>")))
            out.end = len(text) + len(f"</{tag}>")
            out.closed_by_stop = True
            return out
        out.malformed = f"unclosed_tag: <{tag}> is never closed"
    return out


# -- tool calls written as text ------------------------------------------------------------------

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def split_think(text: str | None) -> tuple[str | None, str | None]:
    """``(text without its reasoning, the reasoning)`` of a reasoning model's reply.

    Removes every ``<think>...</think>`` block; a ``</think>`` with no opening tag (chat templates
    that put ``<think>`` in the generation prompt, e.g. Qwen3, DeepSeek-R1) makes everything before
    it reasoning; an opening ``<think>`` never closed (the budget ran out while thinking) makes the
    rest reasoning. The reasoning is the blocks' texts joined by blank lines, ``None`` when there
    is none. Every answer, tool-call and JSON parse runs on the first element.
    """
    if not text or "think>" not in text:
        return text, None
    parts: list[str] = []
    head, sep, tail = text.partition("</think>")
    if sep and "<think>" not in head:
        parts.append(head)
        text = tail
    parts += _THINK.findall(text)
    rest = _THINK.sub("", text)
    if "<think>" in rest:
        rest, _, unclosed = rest.partition("<think>")
        parts.append(unclosed)
    reasoning = "\n\n".join(p.strip() for p in parts if p.strip())
    return rest.strip(), (reasoning or None)


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object that can be decoded from ``text``, left to right."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return found
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pos = start + 1
            continue
        if isinstance(obj, dict):
            found.append(obj)
        pos = end


@dataclass(frozen=True)
class ToolCallText:
    """Tool calls parsed from text: the calls, the text before the first call (the thought; with a
    reasoning model's ``<think>`` block kept in front, tagged), and the first block that did not
    parse (``error``; the calls before it are kept)."""

    calls: list[ToolCall]
    rest: str | None
    error: str | None = None


def parse_tool_calls(text: str | None, names: Collection[str] = (), *, id_prefix: str = "call_") -> ToolCallText:
    """The tool calls written in ``text``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
    blocks (hermes; ``function``/``parameters`` spellings and arguments as a JSON string accepted),
    or a reply that is one JSON object (bare or fenced) naming a tool, or ``{"tool_calls": [...]}``.
    A JSON ``{"answer": ...}`` is not a call. ``names``: the tools offered (a call naming another is
    not taken, ``error`` says so); empty: any name. A block that is not one JSON object of that shape
    (e.g. cut off by ``max_tokens``) is ``error``; text after the last block is not part of the turn.
    A reasoning model's ``<think>`` blocks are never parsed for calls."""
    if not text:
        return ToolCallText([], text)
    body, reasoning = split_think(text)
    body = body or ""
    found = _tool_calls(body, set(names), id_prefix)
    if reasoning is not None:
        think = f"<think>{reasoning}</think>"
        rest = think + (f"\n{found.rest}" if found.rest else "") if found.calls else text
        return ToolCallText(found.calls, rest, found.error)
    return found


def _tool_calls(text: str, names: set[str], prefix: str) -> ToolCallText:
    calls: list[ToolCall] = []
    if "<tool_call>" in text:
        rest = text[: text.find("<tool_call>")].strip() or None
        for m in _TOOL_CALL_BLOCK.finditer(text):
            block = m.group(1).strip()
            try:
                obj = json.loads(block)
            except json.JSONDecodeError as exc:
                return ToolCallText(calls, rest, f"tool call {block[:200]!r} is not valid JSON ({exc.msg})")
            call, error = _call(obj, block, names, f"{prefix}{len(calls)}")
            if call is None:
                return ToolCallText(calls, rest, error)
            calls.append(call)
        return ToolCallText(calls, rest)
    stripped = text.strip()
    if not stripped.startswith(("{", "```")):
        return ToolCallText([], text)
    fenced = _FENCE.fullmatch(stripped)
    candidate = fenced.group(1).strip() if fenced else stripped
    try:
        obj = json.loads(candidate)
    except json.JSONDecodeError as exc:
        if not stripped.startswith("{"):
            return ToolCallText([], text)
        return ToolCallText([], text, f"reply {stripped[:200]!r} starts like JSON but is not valid JSON ({exc.msg})")
    if not isinstance(obj, dict) or "answer" in obj:
        return ToolCallText([], text)
    listed = obj.get("tool_calls")
    items: list[Any] = listed if isinstance(listed, list) else [obj]
    if not isinstance(listed, list) and not any(k in obj for k in ("name", "function", "tool")):
        return ToolCallText([], text)
    for item in items:
        call, error = _call(item, candidate, names, f"{prefix}{len(calls)}")
        if call is None:
            return ToolCallText(calls, None if calls else text, error)
        calls.append(call)
    return ToolCallText(calls, None)


def _call(obj: Any, body: str, names: set[str], call_id: str) -> tuple[ToolCall | None, str | None]:
    """A ToolCall from ``{"name", "arguments"}`` (or ``function``/``parameters``/``tool`` spellings)."""
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name", obj.get("tool")) if isinstance(obj, dict) else None
    if not isinstance(obj, dict) or not isinstance(name, str):
        return None, f"tool call {body[:200]!r} needs a string 'name' and an 'arguments' object"
    if names and name not in names:
        return None, f"tool call names {name!r}, which is not one of the tools offered ({', '.join(sorted(names))})"
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            return None, f"arguments {args[:200]!r} are not valid JSON ({exc.msg})"
    if not isinstance(args, dict):
        return None, f"arguments {args!r} must be a JSON object"
    return ToolCall(id=call_id, name=name, arguments=args), None


__all__ = ["CONTROL_TOKEN_RE", "PROTOCOL_TAGS", "MALFORMED", "neutralize_control_tokens", "neutralize_tags",
           "neutralize_messages",
           "Segment", "ParsedTurn", "parse_turn", "split_think", "json_objects", "ToolCallText",
           "parse_tool_calls"]
