"""Observation-masked tokenization of an SFT record (RAGShaper Eq. 9).

The record is rendered with TRL's bundled ChatML *training* template (``qwen2_5_training.jinja``,
read from the installed ``trl`` package, never copied): it wraps every assistant turn in
``{% generation %}`` markers, so ``apply_chat_template(..., return_assistant_tokens_mask=True)``
marks exactly the assistant tokens (thought, ``<tool_call>`` JSON, final answer and the closing
``<|im_end|>``) with 1 and everything else (system, user, tool responses) with 0. SmolLM2 speaks
ChatML, so the template fits it. The trainer in :mod:`agentrag.train.sft` trains on exactly this
mask.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agentrag.errors import UserError

TRAINING_TEMPLATE = "qwen2_5_training.jinja"


@lru_cache(maxsize=4)
def training_chat_template(name: str = TRAINING_TEMPLATE) -> str:
    """The text of a chat template bundled with the installed ``trl`` package."""
    from importlib.resources import files

    try:
        res = files("trl") / "chat_templates" / name
        return res.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise UserError(f"chat template {name!r} not found in the installed trl package; "
                        "install the training extra: pip install 'agentrag[train]'") from exc


def training_chat_template_path(name: str = TRAINING_TEMPLATE) -> str:
    """Filesystem path of a bundled TRL chat template (for ``SFTConfig(chat_template_path=...)``)."""
    from importlib.resources import as_file, files

    training_chat_template(name)  # validates that it exists
    with as_file(files("trl") / "chat_templates" / name) as p:
        return str(p)


@dataclass
class MaskedTokens:
    """Token ids of a rendered record and, for each token, 1 if it is trained (assistant) else 0."""

    input_ids: list[int]
    assistant_mask: list[int]

    @property
    def n_trained(self) -> int:
        return sum(self.assistant_mask)


def _tools_of(record: dict[str, Any]) -> list[dict[str, Any]] | None:
    tools = record.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools)
    return tools or None


def assistant_mask(record: dict[str, Any], tokenizer: Any, *, chat_template: str | None = None) -> MaskedTokens:
    """Tokenize a TRL conversational record with the ChatML training template; return ids + mask."""
    template = chat_template or training_chat_template()
    out = tokenizer.apply_chat_template(
        record["messages"], tools=_tools_of(record), chat_template=template,
        tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
    )
    ids = list(out["input_ids"])
    mask = [int(x) for x in out["assistant_masks"]]
    if len(ids) != len(mask):
        raise RuntimeError(f"assistant mask has {len(mask)} entries for {len(ids)} tokens")
    return MaskedTokens(input_ids=ids, assistant_mask=mask)


def render(record: dict[str, Any], tokenizer: Any, *, chat_template: str | None = None) -> str:
    """The record rendered as text with the training template (what the model is trained on)."""
    text: str = tokenizer.apply_chat_template(record["messages"], tools=_tools_of(record),
                                              chat_template=chat_template or training_chat_template(),
                                              tokenize=False)
    return text


__all__ = ["TRAINING_TEMPLATE", "training_chat_template", "training_chat_template_path", "MaskedTokens",
           "assistant_mask", "render"]
