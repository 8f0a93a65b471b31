"""Which pipeline wrote a run directory, told from the files it holds."""

from __future__ import annotations

import os
from pathlib import Path

from agentrag.errors import UserError


def signatures() -> dict[str, tuple[str, ...]]:
    """Run kind -> the files that mark it (all must exist), in the order they are tried: an eval
    suite's, eval's, then each registered synthesizer's (:attr:`~agentrag.synth.driver.Synthesizer.run_files`)."""
    from agentrag.synth.registry import SYNTHESIZERS, synthesizer_class

    out: dict[str, tuple[str, ...]] = {"suite": ("suite.json",), "eval": ("results.jsonl",)}
    for name in SYNTHESIZERS:
        files = synthesizer_class(name).run_files
        if files:
            out[name] = tuple(files)
    return out


def detect_run_kind(run_dir: str | os.PathLike[str]) -> str:
    """The kind of run in ``run_dir`` (a key of :func:`signatures`); a UserError naming the directory
    and the files looked for when it is missing, not a directory or holds none of them."""
    d = Path(run_dir)
    if not d.exists():
        raise UserError(f"run directory {str(d)!r} does not exist")
    if not d.is_dir():
        raise UserError(f"{str(d)!r} is not a directory: pass a run directory (the --out of eval, eval --suite or synth)")
    kinds = signatures()
    for kind, files in kinds.items():
        if all((d / f).is_file() for f in files):
            return kind
    wanted = "; ".join(f"{kind}: {' + '.join(files)}" for kind, files in kinds.items())
    raise UserError(f"{str(d)!r} is not a run directory agentrag can view: it holds none of the files a run "
                    f"writes ({wanted})")


__all__ = ["signatures", "detect_run_kind"]
