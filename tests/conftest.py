from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AGENTRAG_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# llama.cpp/torch OpenMP threads spin while idle; on a shared CPU that is ~10x slower (see docs/llm.md)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.exists():
        pytest.fail(f"shared data not found at {DATA}; put ../shared beside the repository")
    return DATA
