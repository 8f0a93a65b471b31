"""A Hugging Face dataset card (``README.md``) for an export directory.

The card's YAML header declares the data files, so the directory loads with
``datasets.load_dataset(DIR)`` and can be pushed to the Hub as it is. Note that loading through
Arrow merges the tool-call argument keys of all records (missing ones become ``null``);
``agentrag train`` reads the JSONL itself for that reason.

The config is named after the data file's content (``sft-<sha256 prefix>``), so ``datasets``'
cache, whose key is the config name, never returns one export folder's rows for another's (with
``default`` it did). ``license`` is the user's (``--license``; default ``unknown``: the license of
exported data follows the corpus and the model that produced it, which agentrag cannot know).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import yaml

from agentrag.errors import writing

CARD_FILE = "README.md"
#: the card's license when the user sets none (a Hub license id; see the module docstring)
DEFAULT_LICENSE = "unknown"


def content_config_name(kind: str, data_path: str | os.PathLike[str]) -> str:
    """``KIND-<12 hex digits of the data file's sha256>``: a config name bound to the content."""
    digest = hashlib.sha256()
    with open(data_path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return f"{kind}-{digest.hexdigest()[:12]}"


def dataset_card(kind: str, data_file: str, summary: dict[str, Any], description: str, *,
                 config_name: str = "default", license: str = DEFAULT_LICENSE,
                 language: tuple[str, ...] = ("en",)) -> str:
    """The card text: a YAML header (config, data files, license, task categories, language,
    tags) and a short description with counts and how to load it."""
    header = {
        "configs": [{"config_name": config_name, "data_files": [{"split": "train", "path": data_file}]}],
        "license": license,
        "task_categories": ["text-generation"],
        "language": list(language),
        "tags": ["agentrag", kind, "tool-calling", "retrieval-augmented-generation"],
    }
    counts = "\n".join(f"- {k}: {v}" for k, v in summary.items() if isinstance(v, int))
    return (f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n# agentrag {kind.upper()} export\n\n"
            f"{description}\n\n{counts}\n\n```python\nfrom datasets import load_dataset\n\n"
            f"ds = load_dataset(\"json\", data_files=\"{data_file}\", split=\"train\")\n```\n\n"
            f"Made with `agentrag export {kind}`; see the agentrag docs "
            "(docs/export.md) for the record format and the observation masking.\n")


def write_card(out_dir: str | os.PathLike[str], kind: str, data_file: str, summary: dict[str, Any],
               description: str, *, license: str | None = None) -> Path:
    """Write ``README.md`` (the dataset card) into ``out_dir``; ``data_file`` must be written first
    (the config name is its content hash)."""
    path = Path(out_dir) / CARD_FILE
    tmp = path.with_name(path.name + ".tmp")
    config = content_config_name(kind, Path(out_dir) / data_file)
    from agentrag.runs import replace_if_changed

    with writing(path, tmp):
        tmp.write_text(dataset_card(kind, data_file, summary, description, config_name=config,
                                    license=license or DEFAULT_LICENSE), encoding="utf-8")
        replace_if_changed(tmp, path)
    return path


__all__ = ["DEFAULT_LICENSE", "content_config_name", "dataset_card", "write_card"]
