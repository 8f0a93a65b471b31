"""DPO export: preference pairs as TRL conversational records and LLaMA-Factory ranking records.

TRL: ``{"prompt": [messages], "chosen": [messages], "rejected": [messages]}`` (+ ``tools``).
LLaMA-Factory (alpaca ranking): ``instruction`` (the prompt's turns after the system message,
as text), ``input`` (empty), ``chosen`` / ``rejected`` (the continuations as text: assistant
content with ``<tool_call>`` JSON, tool results in ``<tool_response>``), ``system``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from agentrag.errors import UserError
from agentrag.export.hf import write_card
from agentrag.export.sft import message_dict, record_tools, write_json, write_jsonl_dicts
from agentrag.paths import check_out_dir
from agentrag.records import Message, PreferencePair, iter_json_objects, read_jsonl

TRL_FILE = "trl_dpo.jsonl"
ALPACA_FILE = "dpo_alpaca.jsonl"
DATASET_INFO_FILE = "dataset_info.json"
ALPACA_DATASET = "agentrag_dpo"


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


def message_text(msg: Message) -> str:
    """One message as plain text in the ChatML tool convention (for text-only formats)."""
    if msg.role == "tool":
        return f"<tool_response>\n{msg.content or ''}\n</tool_response>"
    parts = [msg.content] if msg.content else []
    for tc in msg.tool_calls:
        call = json.dumps({"name": tc.name, "arguments": tc.arguments}, ensure_ascii=False)
        parts.append(f"<tool_call>\n{call}\n</tool_call>")
    return "\n".join(parts)


def _transcript(msgs: list[Message]) -> str:
    if len(msgs) == 1 and msgs[0].role in ("user", "assistant"):
        return message_text(msgs[0])
    return "\n\n".join(f"{m.role}: {message_text(m)}" if m.role != "tool" else message_text(m) for m in msgs)


def to_alpaca_dpo(pairs: Iterable[PreferencePair]) -> list[dict[str, Any]]:
    """LLaMA-Factory alpaca ranking records (instruction/input/chosen/rejected/system)."""
    out = []
    for p in pairs:
        _check(p)
        system = (p.prompt[0].content or "") if p.prompt[0].role == "system" else ""
        rest = p.prompt[1:] if p.prompt[0].role == "system" else p.prompt
        if not rest:
            raise UserError(f"preference pair {p.id!r}: the prompt has only a system message")
        out.append({"instruction": _transcript(rest), "input": "",
                    "chosen": _transcript(p.chosen), "rejected": _transcript(p.rejected), "system": system})
    return out


def alpaca_dataset_info(file_name: str = ALPACA_FILE, name: str = ALPACA_DATASET) -> dict[str, Any]:
    """LLaMA-Factory's ``dataset_info.json`` entry for the ranking export."""
    return {name: {
        "file_name": file_name,
        "ranking": True,
        "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected",
                    "system": "system"},
    }}


def read_pairs(path: str | os.PathLike[str]) -> list[PreferencePair]:
    """Read preference pairs; a malformed line raises UserError naming file:line and field."""
    pairs = list(read_jsonl(path, PreferencePair))
    if not pairs:
        raise UserError(f"{path}: no preference pairs")
    return pairs


def write_dpo_export(out_dir: str | os.PathLike[str], pairs: Iterable[PreferencePair],
                     tools: Sequence[dict[str, Any]] | None = None, *,
                     license: str | None = None) -> dict[str, Any]:
    """Write ``trl_dpo.jsonl``, ``dpo_alpaca.jsonl`` and ``dataset_info.json`` into ``out_dir``
    (``license``: the dataset card's, see :mod:`agentrag.export.hf`)."""
    out = check_out_dir(out_dir)
    pair_list = list(pairs)
    n = write_jsonl_dicts(out / TRL_FILE, to_trl_dpo(pair_list, tools))
    write_jsonl_dicts(out / ALPACA_FILE, to_alpaca_dpo(pair_list))
    write_json(out / DATASET_INFO_FILE, alpaca_dataset_info())
    card = write_card(out, "dpo", TRL_FILE, {"exported": n},
                      "Preference pairs as TRL conversational records (`prompt`, `chosen`, `rejected` chats); "
                      "`dpo_alpaca.jsonl` and `dataset_info.json` hold them for LLaMA-Factory (ranking).",
                      license=license)
    return {"exported": n, "files": [str(out / TRL_FILE), str(out / ALPACA_FILE), str(out / DATASET_INFO_FILE),
                                     str(card)]}


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


__all__ = ["to_trl_dpo", "to_alpaca_dpo", "message_text", "alpaca_dataset_info", "read_pairs",
           "write_dpo_export", "read_trl_dpo"]
