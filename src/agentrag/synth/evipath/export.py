"""The EviPath SFT export, streamed over ``conversations.jsonl`` (bounded memory).

``sft/`` holds the split (both roles mixed, Eq. 7, for ``both``) and ``sft_planner/``,
``sft_executor/`` each role alone, with its own ``dataset_info.json`` entry. A conversation whose
assistant turns use synthesis-only wording is not exported (counted). One pass over the stage
file writes every JSONL file (a temporary file each, moved in place at the end, as
:func:`~agentrag.export.chat.write_chat_export` writes them, with the same bytes): memory holds
one conversation, never the run's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from agentrag.export.chat import chat_record, chat_sharegpt, finish_chat_export
from agentrag.export.sft import SHAREGPT_FILE, TRL_FILE
from agentrag.runs import replace_if_changed
from agentrag.synth.evipath.schema import ConversationRecord
from agentrag.synth.evipath.support import synthesis_wording

ABOUT = {"planner": "multi-turn planner conversations (think + Search actions, executor answers as user "
                    "observations)",
         "executor": "single-turn executor conversations (question + indexed noisy evidence -> think / "
                     "select / answer)"}


class _Target:
    """One export directory's two JSONL files, written to temporary files first (the directory is
    made by the first conversation: none, no directory)."""

    def __init__(self, out: Path) -> None:
        self.out, self.n = out, 0
        self.files: dict[str, IO[str]] = {}

    def add(self, trl: str, sharegpt: str) -> None:
        if not self.files:
            self.out.mkdir(parents=True, exist_ok=True)
            self.files = {name: (self.out / (name + ".tmp")).open("w", encoding="utf-8")
                          for name in (TRL_FILE, SHAREGPT_FILE)}
        self.files[TRL_FILE].write(trl)
        self.files[SHAREGPT_FILE].write(sharegpt)
        self.n += 1

    def close(self, keep: bool) -> None:
        for name, fh in self.files.items():
            fh.close()
            tmp = self.out / (name + ".tmp")
            if keep:
                replace_if_changed(tmp, self.out / name)
            else:
                tmp.unlink(missing_ok=True)

    def finish(self, name: str, info: dict[str, Any], description: str) -> dict[str, Any]:
        return finish_chat_export(self.out, self.n, name=name, description=description, summary=info)


def export_sft(conversations: Iterable[ConversationRecord], out: Path, *, mode: str, split: str,
               roles: tuple[str, ...]) -> dict[str, Any]:
    """Write the export of the kept conversations of ``roles`` (a stream, read once); returns the
    summary :meth:`~agentrag.synth.evipath.pipeline.EviPathStages.export` returns."""
    main = _Target(out / "sft")
    by_role = {r: _Target(out / f"sft_{r}") for r in roles}
    dropped, keep = 0, False
    try:
        for c in conversations:
            if not (c.kept and c.role in roles):
                continue
            if any(m.role == "assistant" and synthesis_wording(m.content or "") for m in c.messages):
                dropped += 1
                continue
            trl = json.dumps(chat_record(c.messages), ensure_ascii=False) + "\n"
            sharegpt = json.dumps(chat_sharegpt(c.messages), ensure_ascii=False) + "\n"
            main.add(trl, sharegpt)
            by_role[c.role].add(trl, sharegpt)
        keep = True
    finally:
        main.close(keep and main.n > 0)
        for t in by_role.values():
            t.close(keep and t.n > 0)
    if not main.n:
        return {"skipped": "no conversation passed the gates", "exported": 0, "synthesis_wording": dropped}
    counts = {f"{r}_conversations": by_role[r].n for r in roles}
    info = main.finish(f"agentrag_evipath_{split}", {**counts, "synthesis_wording": dropped},
                       f"EviPath ({mode}) reasoning paths as chat SFT data, split '{split}': "
                       + " and ".join(ABOUT[r] for r in roles) + ". Train on assistant turns only.")
    info["roles"] = {}
    for r, t in by_role.items():
        if t.n:
            sub = t.finish(f"agentrag_evipath_{r}", {},
                           f"EviPath ({mode}) {ABOUT[r]}. Train on assistant turns only.")
            info["roles"][r] = {"dir": str(t.out), "exported": sub["exported"]}
    return info


__all__ = ["export_sft"]
