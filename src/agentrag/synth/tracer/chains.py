"""Chains assembled from the stage files one at a time, holding an index instead of the records.

A chain is hop 1 (an accepted atomic pair on its sampled document) plus the verified hop records
``hop2.jsonl`` .. ``hop<max>.jsonl`` of its id, up to its first level that is not verified.
:func:`iter_chains` yields them in the order of ``atomic.jsonl`` (pair order within a record), as
the earlier list-based code did (kept as the reference in ``tests/unit/test_tracer_scale.py``), but keeps in memory only, per
level, the byte offset and line number of each verified hop record (:class:`HopIndex`: one dict
entry per verified chain and level, about 200 bytes) and reads a hop record back when its chain
is yielded.
The hop files are scanned without validating a record (a prefix match of ``dump_record``'s line,
``json.loads`` when it does not match); a record is validated when it is read back. As
:class:`~agentrag.runs.JsonlStore` reads a file, the first record of an id counts, a torn last line
is skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from agentrag.records import parse_record
from agentrag.synth.tracer.schema import AtomicPair, AtomicRecord, Chain, DocRecord, Hop, HopRecord

_HEAD = re.compile(rb'\{"schema_version":\d+,"id":"([^"\\]*)","chain_id":"([^"\\]*)","level":\d+,'
                   rb'"status":"(verified|failed)"')


def seed_hop(doc: DocRecord, pair: AtomicPair) -> Hop:
    """Hop 1 of a chain: the accepted atomic pair on its sampled document."""
    return Hop(level=1, template="atomic", atomic_question=pair.question, atomic_answer=pair.answer,
               atomic_aliases=pair.aliases, doc_id=doc.passage_id, doc_title=doc.title, doc_text=doc.text,
               question=pair.question, answer=pair.answer, aliases=pair.aliases, verified=True, checks=pair.checks)


def _head(raw: bytes) -> tuple[str, str, str]:
    """``(record id, chain id, status)`` of one line of a hop file."""
    m = _HEAD.match(raw)
    if m:
        return m.group(1).decode("utf-8"), m.group(2).decode("utf-8"), m.group(3).decode("ascii")
    obj = json.loads(raw)
    return str(obj.get("id")), str(obj.get("chain_id")), str(obj.get("status"))


def scan_verified(path: Path) -> dict[str, tuple[int, int]]:
    """``{chain id: (byte offset, line number)}`` of the verified records of one hop file (first record of an id)."""
    out: dict[str, tuple[int, int]] = {}
    if not path.is_file():
        return out
    seen: set[str] = set()  # record ids, for this scan only
    pos = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            start, pos = pos, pos + len(raw)
            if not raw.endswith(b"\n") or not raw.strip():
                continue
            rid, cid, status = _head(raw)
            if rid in seen:
                continue
            seen.add(rid)
            if status == "verified":
                out[cid] = (start, lineno)
    return out


class HopIndex:
    """Per level, the offsets of the verified hop records (module docstring); open it with ``with``
    to read hops back."""

    def __init__(self, files: Mapping[int, Path]):
        self.files = {level: Path(files[level]) for level in sorted(files)}
        self.verified = {level: scan_verified(path) for level, path in self.files.items()}
        self._fh: dict[int, IO[bytes]] = {}
        self._stack = ExitStack()

    def __enter__(self) -> HopIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        self._fh.clear()

    def depth(self, chain_id: str) -> int:
        """Hop 1 plus the consecutive verified levels from 2."""
        d = 1
        for verified in self.verified.values():
            if chain_id not in verified:
                break
            d += 1
        return d

    def hop(self, level: int, chain_id: str) -> Hop | None:
        """The verified hop of ``chain_id`` at ``level``, read back from its file."""
        fh = self._fh.get(level)
        if fh is None:
            fh = self._fh[level] = self._stack.enter_context(self.files[level].open("rb"))
        offset, lineno = self.verified[level][chain_id]
        fh.seek(offset)
        rec = parse_record(HopRecord, fh.readline().decode("utf-8"), path=self.files[level], lineno=lineno)
        return rec.hop if rec.status == "verified" else None


def iter_chains(docs: Iterable[DocRecord], atomic: Iterable[AtomicRecord], hop_files: Mapping[int, Path],
                want: Callable[[str, int], bool] | None = None) -> Iterator[Chain]:
    """The chains of the documents ``docs`` (module docstring); with ``want``, only those for which
    ``want(chain id, depth)`` is true (the others' hops are not read)."""
    by_doc = {d.id: d for d in docs}
    with HopIndex(hop_files) as index:
        levels = list(index.files)
        for rec in atomic:
            doc = by_doc.get(rec.doc_id)
            if doc is None:
                continue
            for pair in rec.pairs:
                if pair.status != "accepted":
                    continue
                depth = index.depth(pair.id)
                if want is not None and not want(pair.id, depth):
                    continue
                hops = [seed_hop(doc, pair)]
                for level in levels[:depth - 1]:
                    hop = index.hop(level, pair.id)
                    if hop is None:
                        break
                    hops.append(hop)
                yield Chain(id=pair.id, doc_domain=doc.domain, hops=hops)


__all__ = ["seed_hop", "iter_chains", "HopIndex", "scan_verified"]
