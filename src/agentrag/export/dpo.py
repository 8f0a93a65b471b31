"""DPO export: preference pairs as TRL conversational records and LLaMA-Factory ranking records.

TRL: ``{"prompt": [messages], "chosen": [messages], "rejected": [messages]}`` (+ ``tools``).

LLaMA-Factory, sharegpt ranking (``dpo_sharegpt.jsonl``, every pair): ``conversations`` holds the
shared prefix as typed turns (``human`` / ``function_call`` / ``observation`` / ``gpt``: the
prompt after its system message, then the turns chosen and rejected share), ``chosen`` and
``rejected`` one turn each (``gpt``, or ``function_call`` for a tool call), plus ``system`` and
``tools``. LLaMA-Factory's ranking form holds one response per side, so a continuation that goes
on after its first differing assistant turn (a tool result, more turns) is cut there: the
preference is on that turn, and no observation is ever in a chosen/rejected response. The TRL file
keeps the whole continuations.

LLaMA-Factory, alpaca ranking (``dpo_alpaca.jsonl``): only the pairs alpaca holds exactly (a
single user turn after an optional system message, one plain assistant turn each side); pairs
with tool turns or multi-turn prompts are never flattened to text.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from agentrag.errors import UserError
from agentrag.export.hf import write_card
from agentrag.export.sft import (
    SHAREGPT_TAGS,
    message_dict,
    record_tools,
    sharegpt_tools,
    sharegpt_turn,
    sharegpt_turns,
    write_json,
    write_jsonl_dicts,
)
from agentrag.paths import check_out_dir
from agentrag.records import Message, PreferencePair, iter_json_objects, read_jsonl

log = logging.getLogger(__name__)

TRL_FILE = "trl_dpo.jsonl"
SHAREGPT_FILE = "dpo_sharegpt.jsonl"
ALPACA_FILE = "dpo_alpaca.jsonl"
DATASET_INFO_FILE = "dataset_info.json"
SHAREGPT_DATASET = "agentrag_dpo"
ALPACA_DATASET = "agentrag_dpo_alpaca"


def _check(pair: PreferencePair) -> None:
    if not pair.prompt:
        raise UserError(f"preference pair {pair.id!r}: empty prompt")
    if not pair.chosen or not pair.rejected:
        raise UserError(f"preference pair {pair.id!r}: chosen and rejected must both be non-empty")
    if pair.chosen[0].role != "assistant" or pair.rejected[0].role != "assistant":
        raise UserError(f"preference pair {pair.id!r}: chosen and rejected must start with an assistant turn")


def to_trl_dpo(pairs: Iterable[PreferencePair],
               tools: Sequence[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """TRL conversational preference records; ``tools`` is added when given."""
    out = []
    for p in pairs:
        _check(p)
        rec: dict[str, Any] = {"prompt": [message_dict(m) for m in p.prompt],
                               "chosen": [message_dict(m) for m in p.chosen],
                               "rejected": [message_dict(m) for m in p.rejected]}
        if tools:
            rec["tools"] = list(tools)
        out.append(rec)
    return out


def _same(a: Message, b: Message) -> bool:
    """The same turn (tool-call ids aside: two samples of one call get different ids)."""
    return (a.role == b.role and (a.content or "") == (b.content or "")
            and [(t.name, t.arguments) for t in a.tool_calls] == [(t.name, t.arguments) for t in b.tool_calls])


def ranking_split(pair: PreferencePair) -> tuple[list[Message], Message, Message, bool]:
    """The pair in LLaMA-Factory's ranking form: the shared prefix (the prompt, then the leading
    turns chosen and rejected share), the first differing chosen and rejected assistant turns, and
    whether either continuation went on after that turn (cut: the form holds one turn a side)."""
    _check(pair)
    c, r = pair.chosen, pair.rejected
    k = 0
    while k < min(len(c), len(r)) and _same(c[k], r[k]):
        k += 1
    if k == len(c) or k == len(r):
        raise UserError(f"preference pair {pair.id!r}: chosen and rejected do not differ "
                        f"(one is the other's first {k} turns)")
    if c[k].role != "assistant" or r[k].role != "assistant":
        raise UserError(f"preference pair {pair.id!r}: chosen and rejected first differ at turn {k} "
                        f"({c[k].role} vs {r[k].role}); a preference is between two assistant turns")
    return list(pair.prompt) + list(c[:k]), c[k], r[k], len(c) > k + 1 or len(r) > k + 1


def _system_and_rest(pair: PreferencePair, msgs: list[Message]) -> tuple[str, list[Message]]:
    system = (msgs[0].content or "") if msgs[0].role == "system" else ""
    msgs = msgs[1:] if msgs[0].role == "system" else msgs
    if any(m.role == "system" for m in msgs):
        raise UserError(f"preference pair {pair.id!r}: a system message after the first turn")
    if not msgs:
        raise UserError(f"preference pair {pair.id!r}: the prompt has only a system message")
    return system, msgs


_PROMPT_SIDE = ("human", "observation")  # LLaMA-Factory: odd turns, and the last prefix turn
_MODEL_SIDE = ("gpt", "function_call")


def to_sharegpt_dpo(pairs: Iterable[PreferencePair],
                    tools: Sequence[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """LLaMA-Factory sharegpt ranking records (see the module docstring); ``tools`` (OpenAI
    schemas) becomes the ``tools`` JSON string, ``""`` when not given."""
    tools_json = sharegpt_tools(tools) if tools else ""
    out = []
    for p in pairs:
        prefix, chosen, rejected, _ = ranking_split(p)
        system, rest = _system_and_rest(p, prefix)
        conv = sharegpt_turns(rest)
        for i, turn in enumerate(conv):
            if turn["from"] not in (_PROMPT_SIDE, _MODEL_SIDE)[i % 2] or len(conv) % 2 == 0:
                raise UserError(
                    f"preference pair {p.id!r}: LLaMA-Factory needs the shared turns to alternate user/tool and "
                    f"assistant turns and to end on a user or tool turn; got {[t['from'] for t in conv]}")
        out.append({"conversations": conv, "chosen": sharegpt_turn(chosen), "rejected": sharegpt_turn(rejected),
                    "system": system, "tools": tools_json})
    return out


def alpaca_exact(pair: PreferencePair) -> bool:
    """Whether alpaca holds the pair as it is: one user turn after an optional system message, and
    one plain assistant turn on each side."""
    rest = pair.prompt[1:] if pair.prompt and pair.prompt[0].role == "system" else pair.prompt
    sides = (pair.chosen, pair.rejected)
    return (len(rest) == 1 and rest[0].role == "user"
            and all(len(s) == 1 and s[0].role == "assistant" and not s[0].tool_calls for s in sides))


def to_alpaca_dpo(pairs: Iterable[PreferencePair]) -> list[dict[str, Any]]:
    """LLaMA-Factory alpaca ranking records (instruction/input/chosen/rejected/system) of pairs
    that alpaca holds exactly (:func:`alpaca_exact`); any other pair is a UserError (write it in
    the sharegpt ranking form, :func:`to_sharegpt_dpo`)."""
    out = []
    for p in pairs:
        _check(p)
        if not alpaca_exact(p):
            raise UserError(f"preference pair {p.id!r}: alpaca holds a single user turn and one plain assistant "
                            "turn a side; this pair has tool or multi-turn turns (use the sharegpt ranking form)")
        system = (p.prompt[0].content or "") if p.prompt[0].role == "system" else ""
        out.append({"instruction": p.prompt[-1].content or "", "input": "",
                    "chosen": p.chosen[0].content or "", "rejected": p.rejected[0].content or "",
                    "system": system})
    return out


def dpo_dataset_info(*, alpaca: bool = True) -> dict[str, Any]:
    """LLaMA-Factory's ``dataset_info.json`` entries of the DPO export: ``agentrag_dpo`` (sharegpt
    ranking, every pair) and, when ``alpaca``, ``agentrag_dpo_alpaca``."""
    info: dict[str, Any] = {SHAREGPT_DATASET: {
        "file_name": SHAREGPT_FILE,
        "ranking": True,
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected", "system": "system",
                    "tools": "tools"},
        "tags": dict(SHAREGPT_TAGS),
    }}
    if alpaca:
        info[ALPACA_DATASET] = {
            "file_name": ALPACA_FILE,
            "ranking": True,
            "formatting": "alpaca",
            "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected",
                        "system": "system"},
        }
    return info


def read_pairs(path: str | os.PathLike[str]) -> list[PreferencePair]:
    """Read preference pairs; a malformed line raises UserError naming file:line and field."""
    pairs = list(read_jsonl(path, PreferencePair))
    if not pairs:
        raise UserError(f"{path}: no preference pairs")
    return pairs


def write_dpo_export(out_dir: str | os.PathLike[str], pairs: Iterable[PreferencePair],
                     tools: Sequence[dict[str, Any]] | None = None, *,
                     license: str | None = None) -> dict[str, Any]:
    """Write ``trl_dpo.jsonl``, ``dpo_sharegpt.jsonl``, ``dpo_alpaca.jsonl`` (the pairs alpaca holds
    exactly; possibly empty), ``dataset_info.json`` and the card into ``out_dir`` (``license``: the
    card's, see :mod:`agentrag.export.hf`). ``pairs`` that is not an iterator (a list, a run's
    :class:`~agentrag.runs.JsonlStore`) is read once per file, pair by pair. The summary counts
    the pairs cut to their first differing turn in the sharegpt file (``sharegpt_cut``) and those
    in the alpaca file."""
    out = check_out_dir(out_dir)
    # a re-iterable (a list, a run's stage file) is read once per file, pair by pair: no file's
    # records are held; a one-shot iterator is read into a list first
    source = list(pairs) if iter(pairs) is pairs else pairs
    n = write_jsonl_dicts(out / TRL_FILE, (to_trl_dpo([p], tools)[0] for p in source))
    cut = 0

    def sharegpt() -> Iterator[dict[str, Any]]:
        nonlocal cut
        for p in source:
            cut += ranking_split(p)[3]
            yield to_sharegpt_dpo([p], tools)[0]

    write_jsonl_dicts(out / SHAREGPT_FILE, sharegpt())
    if cut:
        log.warning("%d of %d pairs go on after their first differing assistant turn: cut there in %s "
                    "(LLaMA-Factory's ranking form holds one turn a side); %s keeps them whole", cut, n,
                    SHAREGPT_FILE, TRL_FILE)
    n_alpaca = write_jsonl_dicts(out / ALPACA_FILE, (to_alpaca_dpo([p])[0] for p in source if alpaca_exact(p)))
    write_json(out / DATASET_INFO_FILE, dpo_dataset_info(alpaca=n_alpaca > 0))
    summary: dict[str, Any] = {"exported": n, "sharegpt_cut": cut, "alpaca": n_alpaca}
    card = write_card(out, "dpo", TRL_FILE, summary,
                      "Preference pairs as TRL conversational records (`prompt`, `chosen`, `rejected` chats); "
                      "`dpo_sharegpt.jsonl` (sharegpt ranking, tool turns typed) and `dataset_info.json` hold "
                      "them for LLaMA-Factory.", license=license)
    summary["files"] = [str(out / name) for name in (TRL_FILE, SHAREGPT_FILE, ALPACA_FILE, DATASET_INFO_FILE)]
    summary["files"].append(str(card))
    return summary


def read_trl_dpo(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a TRL DPO JSONL file, checking each record (UserError with file:line and field)."""

    rows = []
    for lineno, obj in iter_json_objects(path):
        for key in ("prompt", "chosen", "rejected"):
            val = obj.get(key)
            if not isinstance(val, list) or not val or not all(isinstance(m, dict) and "role" in m for m in val):
                raise UserError(f"{path}:{lineno}: field {key!r} must be a non-empty list of chat messages")
        rows.append({"prompt": obj["prompt"], "chosen": obj["chosen"], "rejected": obj["rejected"],
                     "tools": record_tools(obj, path, lineno)})
    if not rows:
        raise UserError(f"{path}: no records; export some with `agentrag export dpo`")
    return rows


__all__ = ["to_trl_dpo", "to_sharegpt_dpo", "ranking_split", "to_alpaca_dpo", "alpaca_exact", "dpo_dataset_info",
           "read_pairs", "write_dpo_export", "read_trl_dpo"]
