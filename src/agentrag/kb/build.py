"""``build_kb``: a knowledge base from corpus files, from Python (what ``agentrag kb build`` runs).

It detects each file's format, collects the gold (supporting) passage ids of every question of
a raw multi-hop file (HotpotQA, 2Wiki, MuSiQue) into ``gold.json``, pools and deduplicates the
passages of all files, and indexes them (:meth:`KnowledgeBase.build`: written into
``DIR.partial`` and renamed when done; rerunning after an interruption resumes there)::

    from agentrag.kb import build_kb

    kb = build_kb(["hotpot_dev.json"], "kb/hotpot", method="bm25")
    kb.search(["Who wrote Hamlet?"], 5)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrag.config import load_config
from agentrag.errors import UserError
from agentrag.kb.base import Embedder
from agentrag.kb.config import KBConfig
from agentrag.kb.ingest import FORMATS, MULTIHOP_FORMATS, file_format, gold_passages, read_corpus
from agentrag.kb.store import KnowledgeBase
from agentrag.paths import check_out_dir
from agentrag.progress import ProgressArg, progress_for

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

#: set to any value to show the embedding progress bar when stderr is not a terminal
PROGRESS_ENV = "AGENTRAG_PROGRESS"


def collect_gold(paths: Sequence[PathLike], fmt: str = "auto") -> dict[str, list[str]]:
    """Question id -> gold passage ids, over the raw multi-hop files among ``paths`` (files of
    other formats contribute nothing)."""
    gold: dict[str, list[str]] = {}
    for path in paths:
        f = file_format(path) if fmt == "auto" else fmt
        if f in MULTIHOP_FORMATS:
            gold.update(gold_passages(path, f))
    return gold


#: the ``params.json`` entry naming what a KB was built from (files, format, settings)
INPUTS_KEY = "inputs_key"


def inputs_key(paths: Sequence[Path], fmt: str, cfg: KBConfig, embedder: Embedder | None = None) -> str:
    """What a build depends on: each corpus file (absolute path, size, modification time), the
    format, the resolved config, and the name of an embedder object. A rerun with the same key
    reuses the finished KB; an edited file or a changed option makes a new key."""
    files = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            raise UserError(f"{p}: file not found") from None
        files.append([str(p.resolve()), st.st_size, st.st_mtime_ns])
    blob = {"files": files, "fmt": fmt, "config": cfg.model_dump(mode="json"),
            "embedder": None if embedder is None else getattr(embedder, "name", type(embedder).__name__)}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:20]


def built_from(directory: Path) -> str | None:
    """The inputs key of the complete KB in ``directory`` (None: not a complete KB, or built
    before keys were recorded)."""
    try:
        params = json.loads((directory / "params.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    key = params.get(INPUTS_KEY) if isinstance(params, dict) else None
    return str(key) if key else None


def kb_config(config: KBConfig | PathLike | None = None, *, name: str | None = None, method: str | None = None,
              embedder: str | None = None, backend: str | None = None, index_type: str | None = None,
              overrides: Sequence[str] = ()) -> KBConfig:
    """The KB configuration from keyword values (lowest), then ``config`` (a :class:`KBConfig`
    or a YAML file), then ``overrides`` (``key=value``): the order of ``agentrag kb build``'s
    options, ``--config`` and ``--set``."""
    base: dict[str, Any] = {"name": name, "method": method, "index": {"type": index_type} if index_type else None,
                            "embedder": {k: v for k, v in {"model": embedder, "backend": backend}.items()
                                         if v is not None} or None}
    base = {k: v for k, v in base.items() if v is not None}
    if isinstance(config, KBConfig):
        return load_config(KBConfig, None, list(overrides), base=_merge(base, config.model_dump(exclude_unset=True)))
    return load_config(KBConfig, None if config is None else Path(config), list(overrides), base=base)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def build_kb(corpus_paths: PathLike | Sequence[PathLike], out: PathLike, config: KBConfig | PathLike | None = None,
             *, fmt: str = "auto", name: str | None = None, method: str | None = None,
             embedder: Embedder | str | None = None, backend: str | None = None, index_type: str | None = None,
             overrides: Sequence[str] = (), overwrite: bool = False, progress: ProgressArg = None) -> KnowledgeBase:
    """Build the KB directory ``out`` from corpus files and return it, opened.

    ``corpus_paths``: FlashRAG ``{id, contents}`` jsonl, ``{title, text}`` json/jsonl, or raw
    HotpotQA/2Wiki/MuSiQue files (their context paragraphs are pooled and deduplicated, and the
    gold passage ids of every question kept in ``gold.json``, read by ``kb eval-recall``).
    ``fmt``: one of :data:`~agentrag.kb.ingest.FORMATS` (``auto`` detects per file).
    ``method``: ``hybrid`` (default), ``dense``, or ``bm25`` (no dense index: nothing embedded).
    ``embedder``: an :class:`~agentrag.kb.base.Embedder` object, or a sentence-transformers model
    name or path (default: the embedded all-MiniLM-L6-v2). ``config``, ``name``, ``backend``,
    ``index_type`` and ``overrides``: see :func:`kb_config`. ``progress``: heartbeat lines for
    each stage (ingest, bm25, embedding) on stderr (``True``; by default when the session is
    interactive), none (``False``), or your callback ``(stage, done, total)`` (see
    :mod:`agentrag.progress`); ``$AGENTRAG_PROGRESS`` adds a tqdm bar over the embedding.

    Raises :class:`~agentrag.errors.UserError` for a missing or malformed file, an unknown
    format, a bad config value, or an existing ``out`` without ``overwrite``.
    """
    paths = [Path(corpus_paths)] if isinstance(corpus_paths, (str, os.PathLike)) else [Path(p) for p in corpus_paths]
    if not paths:
        raise UserError("build_kb: no corpus files given")
    if fmt not in FORMATS:
        raise UserError(f"unknown corpus format {fmt!r}; choose one of {', '.join(FORMATS)}")
    emb_obj = None if embedder is None or isinstance(embedder, str) else embedder
    cfg = kb_config(config, name=name, method=method, embedder=embedder if isinstance(embedder, str) else None,
                    backend=backend, index_type=index_type, overrides=overrides)
    target = check_out_dir(out)
    key = inputs_key(paths, fmt, cfg, emb_obj)
    if target.exists() and not overwrite:  # before reading any corpus file
        if built_from(target) == key:  # a verbatim rerun: the finished KB is the answer
            log.info("%s: a complete KB built from the same files and settings; reusing it", target)
            kb = KnowledgeBase.load(target, embedder=emb_obj)
            kb.reused = True
            return kb
        raise UserError(f"{target} already exists{'' if built_from(target) is None else ' (built from other files or settings)'}; "
                        "pass another output directory (the CLI's --out), or overwrite=True (--overwrite) to replace it")
    gold = collect_gold(paths, fmt)
    bar = bool(os.environ.get(PROGRESS_ENV))
    stream = itertools.chain.from_iterable(read_corpus(p, fmt) for p in paths)
    with progress_for(progress, unit="passages") as beat:
        return KnowledgeBase.build(stream, target, cfg, embedder=emb_obj, gold=gold or None, overwrite=overwrite,
                                   dedupe=True, progress=bar, report=beat, params={INPUTS_KEY: key})


__all__ = ["build_kb", "collect_gold", "kb_config", "inputs_key", "built_from", "PROGRESS_ENV"]
