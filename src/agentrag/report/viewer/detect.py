"""Which pipeline wrote a run directory, told from the files it holds."""

from __future__ import annotations

import os
from pathlib import Path

from agentrag.errors import UserError

#: run kind -> files that mark it (all must exist), in the order they are tried
SIGNATURES: dict[str, tuple[str, ...]] = {
    "suite": ("suite.json",),
    "eval": ("results.jsonl",),
    "ragshaper": ("seeds.jsonl", "trees.jsonl"),
    "reasonrag": ("questions.jsonl", "events.jsonl"),
    "evipath": ("items.jsonl", "plans.jsonl"),
    "tracer": ("docs.jsonl", "atomic.jsonl"),
}
RUN_KINDS = tuple(SIGNATURES)


def detect_run_kind(run_dir: str | os.PathLike[str]) -> str:
    """The kind of run in ``run_dir`` (one of :data:`RUN_KINDS`); a UserError naming the directory
    and the files looked for when it is missing, not a directory or holds none of them."""
    d = Path(run_dir)
    if not d.exists():
        raise UserError(f"run directory {str(d)!r} does not exist")
    if not d.is_dir():
        raise UserError(f"{str(d)!r} is not a directory: pass a run directory (the --out of eval, eval --suite or synth)")
    for kind, files in SIGNATURES.items():
        if all((d / f).is_file() for f in files):
            return kind
    wanted = "; ".join(f"{kind}: {' + '.join(files)}" for kind, files in SIGNATURES.items())
    raise UserError(f"{str(d)!r} is not a run directory agentrag can view: it holds none of the files a run "
                    f"writes ({wanted})")


__all__ = ["RUN_KINDS", "SIGNATURES", "detect_run_kind"]
