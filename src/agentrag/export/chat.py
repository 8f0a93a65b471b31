"""Plain multi-turn chats (system / user / assistant, no tools) as SFT exports: TRL conversational
``{"messages": [...]}`` and LLaMA-Factory sharegpt (human / gpt) with ``dataset_info.json`` and
a dataset card. Only assistant turns are trained (the ChatML training template of
:mod:`agentrag.export.masking` masks system and user turns, observations included)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentrag.errors import UserError
from agentrag.export.hf import write_card
from agentrag.export.sft import (
    DATASET_INFO_FILE,
    SHAREGPT_FILE,
    TRL_FILE,
    sharegpt_turns,
    write_json,
    write_jsonl_dicts,
)
from agentrag.records import Message


def chat_record(messages: Sequence[Message]) -> dict[str, Any]:
    """One TRL conversational record."""
    for m in messages:
        if m.role not in ("system", "user", "assistant") or m.tool_calls:
            raise UserError(f"chat export takes system/user/assistant messages without tool calls, got {m.role!r}")
    return {"messages": [{"role": m.role, "content": m.content or ""} for m in messages]}


def chat_sharegpt(messages: Sequence[Message]) -> dict[str, Any]:
    """One LLaMA-Factory sharegpt record (``system`` apart, then human/gpt turns)."""
    system = next((m.content or "" for m in messages if m.role == "system"), "")
    return {"conversations": sharegpt_turns(messages), "system": system}


def chat_dataset_info(name: str, file_name: str = SHAREGPT_FILE) -> dict[str, Any]:
    return {name: {"file_name": file_name, "formatting": "sharegpt",
                   "columns": {"messages": "conversations", "system": "system"},
                   "tags": {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt"}}}


def write_chat_export(out_dir: str | os.PathLike[str], chats: Iterable[Sequence[Message]], *, name: str,
                      description: str, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``trl_sft.jsonl``, ``sharegpt.jsonl``, ``dataset_info.json`` and ``README.md``."""
    out = Path(out_dir)
    chats = [list(c) for c in chats]
    n = write_jsonl_dicts(out / TRL_FILE, (chat_record(c) for c in chats))
    write_jsonl_dicts(out / SHAREGPT_FILE, (chat_sharegpt(c) for c in chats))
    return finish_chat_export(out, n, name=name, description=description, summary=summary)


def finish_chat_export(out: Path, n: int, *, name: str, description: str,
                       summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """Beside the ``n`` records of ``out``'s two JSONL files: ``dataset_info.json`` and the card;
    returns the export summary (``summary`` + ``exported`` + ``files``)."""
    write_json(out / DATASET_INFO_FILE, chat_dataset_info(name))
    info: dict[str, Any] = {**(summary or {}), "exported": n}
    card = write_card(out, "sft", TRL_FILE, info, description)
    info["files"] = [str(out / TRL_FILE), str(out / SHAREGPT_FILE), str(out / DATASET_INFO_FILE), str(card)]
    return info


__all__ = ["chat_record", "chat_sharegpt", "chat_dataset_info", "finish_chat_export", "write_chat_export"]
