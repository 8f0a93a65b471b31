"""How many requests reach an OpenAI-compatible server: one setting, adapted to the server.

Two pieces (docs/llm.md, "Concurrency"):

- :class:`AdaptiveLimit`, the request limit of :class:`~agentrag.llm.openai_backend.OpenAIBackend`.
  It adapts by AIMD over windows of ``limit`` attempts: a window in which at least 3 (or all) and
  at least 10% of the attempts were answered 429/503 or timed out halves the limit (attempts sent before
  that decrease are not counted again), a window with fewer adds one, up to the configured value;
  the limit stays in ``[1, configured]`` and every change is logged at INFO.
- :func:`link_request_limits`: a run's items in flight (the synthesizer's or eval's
  ``concurrency``) become the request limit of each OpenAI backend of the run, unless the LLM
  config set the backend's own ``concurrency`` explicitly; then, if it is the lower of the two,
  a warning names it. :func:`default_items_in_flight` is the default of ``concurrency``: small for
  the embedded model (it generates one request at a time), large enough to keep a GPU server
  busy for an endpoint.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

log = logging.getLogger(__name__)

#: default items in flight (and request limit) with an OpenAI-compatible endpoint
REMOTE_ITEMS_IN_FLIGHT = 64
#: default items in flight with the embedded model / a local transformers checkpoint
EMBEDDED_ITEMS_IN_FLIGHT = 2

#: items a run keeps in flight per request slot of the OpenAI-compatible endpoints it links
#: (:func:`link_request_limits`): an item that backs off after a failed attempt (0.5-1 s by default)
#: or works between two requests (gates, retrieval, writing) leaves its slot to another item
#: (benchmarks/synth_concurrency.py; docs/scale.md, "Remote endpoints")
ITEMS_PER_REQUEST_SLOT = 2

#: the description of every run's ``concurrency`` setting (synthesizers, eval)
ITEMS_IN_FLIGHT_HELP = (f"the most requests that reach an OpenAI-compatible endpoint (its backend's limit follows, "
                        f"adapting below it on 429s and timeouts) and the items in flight ({ITEMS_PER_REQUEST_SLOT} x "
                        f"as many against an endpoint, so that an item backing off or working between requests "
                        f"leaves its slot to another). Default: {REMOTE_ITEMS_IN_FLIGHT} when an LLM is an endpoint "
                        f"(keeps a GPU server busy), {EMBEDDED_ITEMS_IN_FLIGHT} for the embedded model (it generates "
                        f"one request at a time)")

Outcome = Literal["ok", "overload", "error"]


class Slot:
    """One attempt's hold on the limit; :meth:`overload` / :meth:`error` say how it ended."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.outcome: Outcome = "ok"

    def overload(self) -> None:
        """The server said it is overloaded (429/503) or the attempt timed out."""
        self.outcome = "overload"

    def error(self) -> None:
        """Any other failure: neither a sign of overload nor a success."""
        self.outcome = "error"


class AdaptiveLimit:
    """A resizable semaphore whose size follows the server's answers (AIMD, module doc).

    ``maximum`` is the configured limit; ``adaptive=False`` keeps the limit fixed at it.
    ``lowest`` and ``changes`` record what happened (for tests and benchmarks).
    """

    #: a window (``limit`` attempts) with at least this share of overload answers, and at least 3
    #: (or all of a smaller window), halves the limit; sporadic 429s (a rate-limited API's background
    #: noise, 2% of requests measured in benchmarks/synth_concurrency.py) are retried without it
    OVERLOAD_SHARE = 0.10

    def __init__(self, maximum: int, *, name: str = "", adaptive: bool = True) -> None:
        if maximum < 1:
            raise ValueError(f"request limit must be at least 1, got {maximum}")
        self.name = name
        self.adaptive = adaptive
        self.maximum = maximum
        self.limit = maximum
        self.lowest = maximum
        self.changes = 0
        self.in_flight = 0
        self._attempts = self._overloads = 0
        self._epoch = 0
        self._cond = threading.Condition()
        #: monotonic time before which no attempt starts (a Retry-After the server sent)
        self.resume_at = 0.0

    def __repr__(self) -> str:
        return f"AdaptiveLimit({self.limit}/{self.maximum}, in flight {self.in_flight})"

    def resize(self, maximum: int) -> None:
        """Set the configured limit (the run's items in flight); the current limit restarts there."""
        if maximum < 1:
            raise ValueError(f"request limit must be at least 1, got {maximum}")
        with self._cond:
            self.maximum = self.limit = self.lowest = maximum
            self._attempts = self._overloads = 0
            self._cond.notify_all()

    def hold(self, seconds: float) -> None:
        """Start no attempt for ``seconds`` from now (the server's Retry-After): attempts already
        sent finish, new ones wait until then."""
        import time

        with self._cond:
            self.resume_at = max(self.resume_at, time.monotonic() + seconds)

    @contextmanager
    def slot(self) -> Iterator[Slot]:
        """Wait for a free slot (and for a :meth:`hold` to pass), hold it for one attempt, and learn
        from how the attempt ended (an exception that escapes without a verdict counts as ``error``)."""
        import time

        with self._cond:
            while True:
                pause = self.resume_at - time.monotonic()
                if pause > 0:
                    self._cond.wait(pause)
                elif self.in_flight >= self.limit:
                    self._cond.wait()
                else:
                    break
            self.in_flight += 1
            held = Slot(self._epoch)
        try:
            yield held
        except BaseException:
            if held.outcome == "ok":
                held.outcome = "error"
            raise
        finally:
            self._release(held)

    def _release(self, held: Slot) -> None:
        with self._cond:
            self.in_flight -= 1
            # an attempt sent before the last decrease tells nothing about the new limit
            if self.adaptive and held.epoch == self._epoch:
                self._attempts += 1
                self._overloads += held.outcome == "overload"
                if self._overloads >= min(self.limit, max(3, math.ceil(self.OVERLOAD_SHARE * self.limit))):
                    self._epoch += 1
                    self._reset(max(1, self.limit // 2), "the server answered 429/503 or timed out")
                elif self._attempts >= self.limit:  # a window without enough overload to matter
                    self._reset(min(self.maximum, self.limit + 1), "no overload for a window of requests")
            # wake as many waiters as there are free slots, not all of them (with many more threads
            # than slots, waking every waiter per request costs CPU in proportion to the waiters)
            self._cond.notify(max(0, self.limit - self.in_flight))

    def _reset(self, new: int, why: str) -> None:
        """Start a new window at limit ``new`` (logged when it changes)."""
        if new != self.limit:
            log.info("requests in flight to %s: %d -> %d of %d (%s)", self.name or "the LLM endpoint",
                     self.limit, new, self.maximum, why)
            self.limit = new
            self.lowest = min(self.lowest, new)
            self.changes += 1
        self._attempts = self._overloads = 0


def default_items_in_flight(*llms: Any) -> int:
    """The default ``concurrency`` for a run whose LLMs are ``llms`` (references such as
    ``"openai:m@URL"`` or ``"embedded"``, or LLM objects; None entries are skipped): the remote
    default when any of them is an OpenAI-compatible endpoint, else the embedded one."""
    return REMOTE_ITEMS_IN_FLIGHT if any(_is_remote(x) for x in llms if x is not None) else EMBEDDED_ITEMS_IN_FLIGHT


def _is_remote(llm: Any) -> bool:
    if isinstance(llm, str):
        from agentrag.errors import UserError
        from agentrag.llm.reference import parse_llm_ref

        try:
            return parse_llm_ref(llm).is_remote
        except (UserError, OSError):  # the input check names a bad reference; the default does not matter
            return False
    return any(getattr(b, "backend", None) == "openai" for b in _backends(llm))


def _backends(llm: Any) -> list[Any]:
    """The backend objects under ``llm`` (a response cache or another wrapper has ``inner``)."""
    seen: list[Any] = []
    while llm is not None and all(llm is not s for s in seen):
        seen.append(llm)
        llm = getattr(llm, "inner", None)
    return seen


def link_request_limits(llms: Iterable[Any], items: int) -> int:
    """Make ``items`` (a run's ``concurrency``) the request limit of each OpenAI backend among
    ``llms``; a backend whose LLM config sets ``concurrency`` explicitly keeps it, with a warning
    when it is the lower of the two (module doc). Returns the items the run keeps in flight:
    :data:`ITEMS_PER_REQUEST_SLOT` x ``items`` when an endpoint is among ``llms``, else ``items``."""
    done: set[int] = set()
    for llm in llms:
        for backend in _backends(llm):
            set_limit = getattr(backend, "set_request_limit", None)
            if set_limit is None or id(backend) in done:
                continue
            done.add(id(backend))
            config = backend.config
            if "concurrency" not in config.model_fields_set:
                set_limit(items)
            elif config.concurrency < items:
                log.warning("the run's concurrency is %d but the LLM config of %s sets concurrency: %d, so at most %d "
                            "requests reach the server; raise that setting (or drop it: the run's concurrency is "
                            "then the backend's limit) or lower the run's concurrency",
                            items, getattr(backend, "base_url", backend), config.concurrency, config.concurrency)
    return items * ITEMS_PER_REQUEST_SLOT if done else items


__all__ = ["AdaptiveLimit", "Slot", "ITEMS_IN_FLIGHT_HELP", "ITEMS_PER_REQUEST_SLOT", "REMOTE_ITEMS_IN_FLIGHT", "EMBEDDED_ITEMS_IN_FLIGHT", "default_items_in_flight",
           "link_request_limits"]
