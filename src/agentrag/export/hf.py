"""A Hugging Face dataset card (``README.md``) for an export directory.

The card's YAML header declares the data files, so the directory loads with
``datasets.load_dataset(DIR)`` and can be pushed to the Hub as it is. Note that loading through
Arrow merges the tool-call argument keys of all records (missing ones become ``null``);
``agentrag train`` reads the JSONL itself for that reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

CARD_FILE = "README.md"


def dataset_card(kind: str, data_file: str, summary: dict[str, Any], description: str) -> str:
    """The card text: a YAML header (data files, tags) and a short description with counts."""
    header = {
        "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": data_file}]}],
        "tags": ["agentrag", kind, "tool-calling", "retrieval-augmented-generation"],
    }
    counts = "\n".join(f"- {k}: {v}" for k, v in summary.items() if isinstance(v, int))
    return (f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n# agentrag {kind.upper()} export\n\n"
            f"{description}\n\n{counts}\n\nMade with `agentrag export {kind}`; see the agentrag docs "
            "(docs/export.md) for the record format and the observation masking.\n")


def write_card(out_dir: str | os.PathLike[str], kind: str, data_file: str, summary: dict[str, Any],
               description: str) -> Path:
    """Write ``README.md`` (the dataset card) into ``out_dir``."""
    path = Path(out_dir) / CARD_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dataset_card(kind, data_file, summary, description), encoding="utf-8")
    os.replace(tmp, path)
    return path


__all__ = ["dataset_card", "write_card"]
