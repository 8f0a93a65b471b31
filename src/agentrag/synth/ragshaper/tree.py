"""InfoCurator tree exploration (§3.1.1, Eq. 2-3).

From a seed entity (the root), the curator LLM looks at the path from the root to the current
node and picks the next action: the dense retrieval tool (query, top_k; Eq. 4 with threshold
tau) or the distractor curation tool. A node gets two children with probability p_b on the
first ``branch_depths`` depths (one child otherwise) and expansion stops at ``max_depth``;
the tree is grown depth-first, so a node's whole subtree is explored before its sibling.
"""

from __future__ import annotations

import functools
import inspect
import logging
import random
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from agentrag.kb.base import Retriever
from agentrag.llm.base import LLM
from agentrag.records import Message, Provenance, ToolCall, Usage
from agentrag.synth.common import call_json, prompt_hash
from agentrag.synth.ragshaper.config import DISTRACTOR_TYPES, RagShaperConfig
from agentrag.synth.ragshaper.distractors import TYPE_GUIDE, write_distractors
from agentrag.synth.ragshaper.schema import DistractorDoc, DocRef, InfoTree, TreeNode

log = logging.getLogger(__name__)

RETRIEVE, DISTRACT = "dense_retrieval", "write_distractor"


def curator_system_prompt(cfg: RagShaperConfig) -> str:
    """The exploration prompt: our wording of the requirements of the paper's Fig. 11."""
    parts = [
        "You are InfoCurator. Starting from a seed entity you explore a knowledge base to collect "
        "the evidence for a question that is short to ask but needs a long chain of dependent "
        "look-ups (A -> B -> C -> D ...).",
        "Rules for retrieval: every dense_retrieval call must discover a NEW entity or relation "
        "that the next step builds on; do not circle around the same entity. Prefer evidence "
        "with hard details (years, dates, counts, versions, identifiers) and say in 'intent' "
        "which link of the chain you are trying to find.",
    ]
    if cfg.distractors.enabled:
        d = cfg.distractors
        kinds = "\n".join(f"- {t}: {g}" for t, g in TYPE_GUIDE.items())
        parts.append(
            "Rules for distractors: use write_distractor to create confusable negative documents. "
            "Start right after the first useful retrieval and repeat after every key hop, "
            f"especially when hard details appear. Over the whole exploration make at least "
            f"{d.min_calls} write_distractor calls and at least {d.min_docs} documents, and vary "
            "the type. Put the fact being imitated in 'original_fact' and tell the writer in "
            "'guideline' what to change. Every distractor must remain distinguishable from the "
            "truth by an explicit cue (edition, date, scope, hedging, opinion tone).\n"
            f"Distractor types:\n{kinds}")
    parts.append("Reply with one JSON object describing your next action and nothing else.")
    return "\n\n".join(parts)


class CuratorAction(BaseModel):
    """The curator's next action (Eq. 2-3). The enum of tools and distractor types and the top_k
    cap are sent to the backend (grammar-constrained decoding) by :func:`action_model`; validation
    stays lenient on them, so a value outside them is repaired by a rule recorded on the node."""

    model_config = ConfigDict(extra="ignore")

    intent: str = Field(max_length=160)
    tool: str = Field(max_length=40)
    query: str = Field(default="", max_length=160)
    top_k: int | None = None


class DistractorAction(CuratorAction):
    """:class:`CuratorAction` with the distractor tool's arguments (not in the ablation)."""

    distractor_type: str = Field(default="", max_length=40)
    original_fact: str = Field(default="", max_length=400)
    guideline: str = Field(default="", max_length=200)


@functools.lru_cache(maxsize=16)
def action_model(distractors: bool, max_top_k: int) -> type[CuratorAction]:
    """The action model of a run: its tool list and top_k cap in the JSON schema (and the
    distractor types, unless ablated)."""
    fields: dict[str, Any] = {
        "tool": (str, Field(max_length=40, json_schema_extra={"enum": [RETRIEVE, DISTRACT] if distractors
                                                               else [RETRIEVE]})),
        "top_k": (int | None, Field(default=None, json_schema_extra={"minimum": 1, "maximum": max_top_k})),
    }
    if distractors:
        fields["distractor_type"] = (str, Field(default="", max_length=40,
                                                json_schema_extra={"enum": list(DISTRACTOR_TYPES)}))
    base = DistractorAction if distractors else CuratorAction
    return create_model(base.__name__, __base__=base, **fields)


def render_path(path: list[TreeNode], max_chars: int) -> str:
    lines = []
    for i, node in enumerate(path[1:], start=1):
        act = node.action
        call = f"{act.name}({', '.join(f'{k}={v!r}' for k, v in act.arguments.items())})" if act else "?"
        lines.append(f"Step {i}: {call}\n  intent: {node.intent}")
        if node.error:
            lines.append(f"  error: {node.error}")
        for d in node.docs:
            lines.append(f"  - [{d.title}] {d.text[:max_chars]}")
    return "\n".join(lines) if lines else "(no steps yet)"


class InfoCurator:
    """Grows one information tree per seed with a curator LLM, a retriever over K and (unless
    ablated) the distractor tool, whose documents are returned for the secondary KB K~."""

    def __init__(self, llm: LLM, retriever: Retriever, cfg: RagShaperConfig, distractor_llm: LLM | None = None,
                 verifier: LLM | None = None):
        self.llm = llm
        self.retriever = retriever
        self.cfg = cfg
        self.distractor_llm = distractor_llm or llm
        self.verifier = verifier  # checks each distractor document's type and that it restates no fact
        self._search_has_method = "method" in inspect.signature(retriever.search).parameters

    def n_children(self, depth: int, rng: random.Random) -> int:
        """0 at max depth; 2 with prob. p_b on depths < branch_depths; 1 otherwise."""
        c = self.cfg.curator
        if depth >= c.max_depth:
            return 0
        if depth < c.branch_depths and rng.random() < c.p_branch:
            return 2
        return 1

    def explore(self, seed_id: str, seed: str) -> tuple[InfoTree, list[DistractorDoc]]:
        start = time.monotonic()
        rng = random.Random(f"{self.cfg.seed}:{seed_id}")
        tree = InfoTree(id=seed_id, seed=seed)
        root = TreeNode(id="n0", depth=0, intent="seed entity", observation=seed)
        tree.nodes.append(root)
        distractors: list[DistractorDoc] = []
        self._grow(tree, [root], rng, distractors)
        tree.elapsed = time.monotonic() - start
        usage = Usage()
        for n in tree.nodes:
            if n.provenance is not None:
                usage = usage + n.provenance.usage
        tree.provenance = Provenance(stage="explore", model=getattr(self.llm, "model", ""),
                                     prompt_hash=prompt_hash([Message(role="system",
                                                                      content=curator_system_prompt(self.cfg))]),
                                     usage=usage)
        return tree, distractors

    def _grow(self, tree: InfoTree, path: list[TreeNode], rng: random.Random,
              distractors: list[DistractorDoc]) -> None:
        node = path[-1]
        siblings: list[TreeNode] = []
        for branch in range(self.n_children(node.depth, rng)):
            child = self._expand(tree, path, branch, siblings, distractors)
            tree.nodes.append(child)
            siblings.append(child)
            if child.error and child.action is None:
                continue  # the curator produced no usable action: this branch ends here
            self._grow(tree, [*path, child], rng, distractors)

    def _expand(self, tree: InfoTree, path: list[TreeNode], branch: int, siblings: list[TreeNode],
                distractors: list[DistractorDoc]) -> TreeNode:
        cfg = self.cfg
        node_id = f"n{len(tree.nodes)}"
        types_used = sorted({d.distractor_type for d in distractors})
        user = [f"Seed entity: {tree.seed}", "Path so far:", render_path(path, cfg.curator.max_observation_chars)]
        if cfg.distractors.enabled:
            user.append(f"Distractor progress for this seed: {tree.distractor_calls} call(s) of "
                        f"{cfg.distractors.min_calls}, {len(distractors)} document(s) of "
                        f"{cfg.distractors.min_docs}; types used: {', '.join(types_used) or 'none'}.")
        if siblings:
            done = "; ".join(f"{s.action.name if s.action else '?'}: {s.intent}" for s in siblings)
            user.append(f"This is branch {branch + 1} from this step. Another branch already did: {done}. "
                        "Take a different direction.")
        user.append("Choose the next action.")
        messages = [Message(role="system", content=curator_system_prompt(cfg)),
                    Message(role="user", content="\n\n".join(user))]
        model = action_model(cfg.distractors.enabled, cfg.curator.max_top_k)
        obj, prov, err = call_json(self.llm, messages, model, name="curator_action", stage="explore",
                                   max_tokens=cfg.curator.max_tokens, temperature=cfg.curator.temperature,
                                   seed=cfg.seed)
        node = TreeNode(id=node_id, parent=path[-1].id, depth=path[-1].depth + 1, provenance=prov)
        if obj is None:
            node.error = err
            return node
        node.intent = obj.intent
        tool = obj.tool
        if tool not in (RETRIEVE, DISTRACT) or (tool == DISTRACT and not cfg.distractors.enabled):
            node.repaired.append(f"invalid tool {tool!r} -> {RETRIEVE}")
        if tool == DISTRACT and cfg.distractors.enabled:
            self._run_distractor(tree, path, node, obj, distractors)
        else:
            self._run_retrieval(path, node, obj, tree.seed)
        return node

    def _run_retrieval(self, path: list[TreeNode], node: TreeNode, obj: CuratorAction, seed: str) -> None:
        c = self.cfg.curator
        # an empty query falls back to the stated intent (or the seed entity on the first step),
        # recorded on the node as a repair
        query = obj.query.strip()
        if not query:
            if node.intent.strip():
                query = node.intent.strip()
                node.repaired.append("empty query -> intent")
            elif len(path) == 1:
                query = seed
                node.repaired.append("empty query -> seed entity")
        top_k = max(1, min(obj.top_k or c.top_k, c.max_top_k))
        node.action = ToolCall(id=f"call_{node.id}", name=RETRIEVE, arguments={"query": query, "top_k": top_k})
        if not query:
            node.error = "empty query"
            node.observation = "error: the query was empty"
            return
        kwargs: dict[str, Any] = {"threshold": c.threshold}
        if self._search_has_method:
            kwargs["method"] = c.method
        # a retrieval failure propagates: an outage leaves the seed unfinished, a 401 stops the run
        hits = self.retriever.search([query], top_k, **kwargs)[0]
        node.docs = [DocRef(id=h.id, title=h.title, text=h.text, kb=h.kb, score=h.score) for h in hits]
        node.observation = "\n".join(f"[{h.title}] {h.text}" for h in hits) or "(no document above the threshold)"

    def _run_distractor(self, tree: InfoTree, path: list[TreeNode], node: TreeNode, obj: Any,
                        distractors: list[DistractorDoc]) -> None:
        dtype = obj.distractor_type
        if dtype not in DISTRACTOR_TYPES:
            unused = [t for t in DISTRACTOR_TYPES if t not in {d.distractor_type for d in distractors}]
            new = (unused or list(DISTRACTOR_TYPES))[0]
            node.repaired.append(f"invalid distractor_type {dtype!r} -> {new}")
            dtype = new
        source = next((d for n in reversed(path) for d in n.docs if d.distractor_type is None), None)
        fact = obj.original_fact.strip()
        if not fact:
            fact = f"{source.title}: {source.text[:400]}" if source else tree.seed
            node.repaired.append("empty original_fact -> " + ("latest document" if source else "seed entity"))
        guideline = obj.guideline
        node.action = ToolCall(id=f"call_{node.id}", name=DISTRACT,
                               arguments={"original_fact": fact, "distractor_type": dtype, "guideline": guideline})
        tree.distractor_calls += 1
        docs, prov, err = write_distractors(
            self.distractor_llm, original_fact=fact, seed=tree.seed, distractor_type=dtype, guideline=guideline,
            seed_id=tree.id, node_id=node.id, source_passage_id=source.id if source else None,
            cfg=self.cfg.distractors, seed_value=self.cfg.seed, verifier=self.verifier, rejected=node.rejected)
        if node.provenance is not None:
            node.provenance.usage = node.provenance.usage + prov.usage
        if err:
            node.error = f"distractor_tool: {err}"
            node.observation = f"error: {err}"
            return
        distractors.extend(docs)
        node.docs = [DocRef(id=d.id, title=d.title, text=d.text, kb="distractor", distractor_type=dtype)
                     for d in docs]
        node.observation = f"Stored {len(docs)} {dtype} document(s): " + " | ".join(d.title for d in docs)


__all__ = ["InfoCurator", "curator_system_prompt", "CuratorAction", "DistractorAction", "action_model", "render_path", "RETRIEVE", "DISTRACT"]
