"""Serving knowledge bases from Python (what ``agentrag kb serve`` runs).

``serve_navigation(kb, distractors, ...)`` serves RAGShaper's constrained navigation (Eq. 8)
over the Search-R1 ``/retrieve`` API, so RL rollouts meet distractor documents as the paper's
teacher does; :func:`navigation_app` returns the same ASGI app without running it (to mount it,
or to run it under another server)::

    from agentrag.kb.serving import serve_navigation

    serve_navigation("kb/main", "runs/shaper/distractor_kb", port=8000, token="s3cret", p_e=0.5, threshold=0.8)

Each KB is a directory or an opened :class:`~agentrag.kb.store.KnowledgeBase`. Both are read
with one method (``dense`` unless given; :class:`~agentrag.kb.routing.MethodRetriever`), and one
search runs at startup, so a method a KB cannot serve fails here rather than per request.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from agentrag._extras import require
from agentrag.errors import UserError
from agentrag.kb.config import METHODS
from agentrag.kb.nav_state import TrajectoryNavigation
from agentrag.kb.retrieve_api import DEFAULT_MAX_WORK
from agentrag.kb.routing import MethodRetriever
from agentrag.kb.server import create_app
from agentrag.kb.store import KnowledgeBase

log = logging.getLogger(__name__)

KBRef = KnowledgeBase | str | os.PathLike[str]

#: the method constrained navigation reads both KBs with unless told otherwise (the paper's tool)
NAVIGATION_METHOD = "dense"


def open_kb(kb: KBRef, *, method: str | None = None, overrides: Sequence[str] = ()) -> KnowledgeBase:
    """``kb`` opened (a directory is loaded with ``overrides``), after one search with ``method``
    (None: the KB's own): a method the KB cannot serve (dense on a BM25-only KB) fails now."""
    if method is not None and method not in METHODS:
        raise UserError(f"--method {method!r}: choose one of {', '.join(METHODS)}")
    store = kb if isinstance(kb, KnowledgeBase) else KnowledgeBase.load(kb, overrides=list(overrides))
    store.search(["startup check"], 1, method=method)
    return store


def trajectory_navigation(main: KnowledgeBase, distractors: KnowledgeBase, *, method: str | None = None,
                          p_e: float = 0.5, k_distractor: int = 2, seed: int | None = 0,
                          threshold: float | None = None) -> TrajectoryNavigation:
    """Per-trajectory Eq. 8 over ``main`` (K) and ``distractors`` (K~), both read with ``method``
    (default ``dense``)."""
    how = method or NAVIGATION_METHOD
    return TrajectoryNavigation(MethodRetriever(main, how), MethodRetriever(distractors, how),
                                k_distractor=k_distractor, p_e=p_e, seed=seed, threshold=threshold)


def navigation_app(kb: KBRef, distractors: KBRef, *, token: str | None = None, method: str | None = None,
                   default_topk: int = 3, p_e: float = 0.5, k_distractor: int = 2, seed: int | None = 0,
                   max_work: int = DEFAULT_MAX_WORK, docs: bool = False, overrides: Sequence[str] = (),
                   threshold: float | None = None) -> Any:
    """The ASGI app serving ``kb`` under constrained navigation with ``distractors`` as K~: each
    ``POST /retrieve`` names its trajectory (``trajectory_id`` or ``trajectory_ids``); ``threshold``
    is Eq. 4's tau (hits of K and K~ scoring at or below it are dropped; the paper uses 0.8 with
    its dense retriever; None keeps every hit); with
    ``token``, every route (``/health`` included) needs ``Authorization: Bearer TOKEN``.
    ``overrides`` (``key=value``, search-time settings) apply to ``kb`` when it is a directory."""
    probe = method or NAVIGATION_METHOD
    main = open_kb(kb, method=probe, overrides=overrides)
    tilde = open_kb(distractors, method=probe)
    nav = trajectory_navigation(main, tilde, method=method, p_e=p_e, k_distractor=k_distractor, seed=seed,
                                threshold=threshold)
    log.info("constrained navigation (Eq. 8, p_e=%s, tau=%s) over %s (%d passages) with K~ %s (%d passages)", p_e,
             threshold, main.directory, len(main), tilde.directory, len(tilde))
    return create_app(main, token=token, method=probe, default_topk=default_topk, navigation=nav,  # /health tells it
                      max_work=max_work, docs=docs)


def serve_navigation(kb: KBRef, distractors: KBRef, *, host: str = "127.0.0.1", port: int = 8000,
                     token: str | None = None, method: str | None = None, default_topk: int = 3, p_e: float = 0.5,
                     k_distractor: int = 2, seed: int | None = 0, max_work: int = DEFAULT_MAX_WORK,
                     docs: bool = False, overrides: Sequence[str] = (), threshold: float | None = None) -> None:
    """Run :func:`navigation_app` with uvicorn on ``host:port`` until interrupted. The state of
    each trajectory lives in this one process (serve constrained navigation from one worker)."""
    uvicorn = require("uvicorn", "kb", purpose="the retrieval server")
    app = navigation_app(kb, distractors, token=token, method=method, default_topk=default_topk, p_e=p_e,
                         k_distractor=k_distractor, seed=seed, max_work=max_work, docs=docs, overrides=overrides,
                         threshold=threshold)
    uvicorn.run(app, host=host, port=port, log_level="warning")


__all__ = ["serve_navigation", "navigation_app", "trajectory_navigation", "open_kb", "NAVIGATION_METHOD"]
