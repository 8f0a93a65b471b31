"""Per-trajectory constrained navigation for the retrieval server (RAGShaper Eq. 8 served to RL).

The paper's teacher meets distractors through constrained navigation; an RL framework that
retrieves over HTTP (Search-R1's ``/retrieve``) can make its rollouts meet them the same way:
each request names the trajectory a query belongs to, and the server keeps, per trajectory,
the step number ``t`` and whether the previous step returned K~ documents. The Eq. 8 decision
itself is :meth:`agentrag.agents.navigation.ConstrainedNavigation.reads_distractor`.

State lives in this process (a bounded LRU of trajectory ids), so serve it from one worker.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from agentrag.kb.base import Retriever
from agentrag.records import Hit


class TrajectoryNavigation:
    """Eq. 8 over ``main`` (K) and ``distractor`` (K~) with one state per trajectory id.

    ``search(trajectory_id, query, k)`` runs step ``t`` of that trajectory (``t`` = 1 on its
    first query) and returns the hits, K~ hits tagged with ``metadata["navigation_origin"]``.
    At most ``max_trajectories`` states are kept; the least recently used is forgotten first
    (a forgotten trajectory starts again at step 1).
    """

    def __init__(self, main: Retriever, distractor: Retriever, *, k_distractor: int = 2, p_e: float = 0.5,
                 seed: int | None = 0, threshold: float | None = None, max_trajectories: int = 100_000) -> None:
        from agentrag.agents.navigation import ConstrainedNavigation

        self.policy = ConstrainedNavigation(main, distractor, k_distractor=k_distractor, p_e=p_e, rng=seed,
                                            threshold=threshold)
        self.max_trajectories = max_trajectories
        self._state: OrderedDict[str, tuple[int, bool]] = OrderedDict()  # id -> (last step, K~ in its hits)
        self._lock = threading.Lock()

    def _next_step(self, trajectory_id: str) -> tuple[int, bool]:
        with self._lock:
            step, had_distractor = self._state.pop(trajectory_id, (0, False))
            self._state[trajectory_id] = (step + 1, had_distractor)  # reserve the step
            while len(self._state) > self.max_trajectories:
                self._state.popitem(last=False)
            return step + 1, had_distractor

    def search(self, trajectory_id: str, query: str, k: int) -> list[Hit]:
        from agentrag.agents.navigation import DISTRACTOR, ORIGIN_KEY, is_distractor

        step, had_distractor = self._next_step(trajectory_id)
        previous = [Hit(id="", text="", score=0.0, metadata={ORIGIN_KEY: DISTRACTOR})] if had_distractor else []
        hits = self.policy.search(query, k, step, previous)
        with self._lock:
            if trajectory_id in self._state:
                self._state[trajectory_id] = (step, any(is_distractor(h) for h in hits))
        return hits

    def steps(self, trajectory_id: str) -> int:
        """Steps served so far to ``trajectory_id`` (0 for an unknown one)."""
        with self._lock:
            return self._state.get(trajectory_id, (0, False))[0]

    def end(self, trajectory_id: str) -> bool:
        """Forget a finished trajectory; True when it was known."""
        with self._lock:
            return self._state.pop(trajectory_id, None) is not None

    def info(self) -> dict[str, Any]:
        return {"navigation": "constrained", "p_e": self.policy.p_e, "k_distractor": self.policy.k_distractor,
                "trajectories": len(self._state)}


__all__ = ["TrajectoryNavigation"]
