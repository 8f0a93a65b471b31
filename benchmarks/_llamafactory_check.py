"""Load every agentrag export kind with LLaMA-Factory's own data loader (issue 25).

Two halves, run by ``scripts/llamafactory_check.sh`` in two interpreters:

``make WORK`` (agentrag's Python) writes small exports with marked text into ``WORK``: an SFT
export of search trajectories (sharegpt with ``function_call`` / ``observation`` turns), a DPO
export with tool-turn and plain pairs (``dpo_sharegpt.jsonl`` ranking, ``dpo_alpaca.jsonl``), a
plain chat export (EviPath's form) and the embedded SmolLM2 tokenizer.

``load WORK`` (LLaMA-Factory's venv; imports no agentrag) loads each with
``llamafactory.data.get_dataset`` per template and prints, per dataset, the records converted and
the trained / masked token counts; it checks from the decoded tokens that every observation is
masked and every thought, call and answer is trained, and exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

# (folder, dataset name, LLaMA-Factory stage): the DPO datasets load as stage "rm" (pairwise)
DATASETS = [("sft", "agentrag_sft", "sft"), ("dpo", "agentrag_dpo", "rm"),
            ("dpo", "agentrag_dpo_alpaca", "rm"), ("chat", "agentrag_chat", "sft")]
OBS = "OBSMARK"  # every observation holds it; it must never be trained
TRAINED = ("THOUGHTMARK", "ANSWERMARK", "dense_search")  # SFT: each must be trained


def make(work: Path) -> None:
    from agentrag.export.chat import write_chat_export
    from agentrag.export.dpo import write_dpo_export
    from agentrag.export.sft import write_sft_export
    from agentrag.records import Message, PreferencePair, Step, ToolCall, Trajectory
    from agentrag.train.model import load_tokenizer

    def call(i: int, k: int) -> ToolCall:
        return ToolCall(id=f"c{i}{k}", name="dense_search", arguments={"query": f"query {i} {k}"})

    trajs = [Trajectory(id=f"t{i}", question=f"Question {i}: who wrote book {i}?",
                        steps=[Step(thought=f"THOUGHTMARK {i}.{k} I should search.", action=call(i, k),
                                    observation=f"{OBS} Doc {k}: book {i} was written by author {k}.")
                               for k in range(1 + i % 3)],
                        answer=f"ANSWERMARK author {i}") for i in range(4)]
    write_sft_export(work / "sft", trajs)

    sys_msg = Message(role="system", content="Answer with the search tool.")
    pairs = []
    for i in range(3):
        prompt = [sys_msg, Message(role="user", content=f"Question {i}?"),
                  Message(role="assistant", content=f"THOUGHTMARK {i}", tool_calls=[call(i, 0)]),
                  Message(role="tool", tool_call_id=f"c{i}0", content=f"{OBS} first documents {i}")]
        pairs.append(PreferencePair(  # chosen searches again; its observation and answer are cut
            id=f"tool{i}", prompt=prompt,
            chosen=[Message(role="assistant", content="CHOSENMARK search more", tool_calls=[call(i, 1)]),
                    Message(role="tool", tool_call_id=f"c{i}1", content=f"{OBS} second documents"),
                    Message(role="assistant", content="ANSWERMARK right")],
            rejected=[Message(role="assistant", content="REJECTEDMARK ANSWERMARK wrong")]))
        pairs.append(PreferencePair(
            id=f"plain{i}", prompt=[sys_msg, Message(role="user", content=f"Plain question {i}?")],
            chosen=[Message(role="assistant", content=f"CHOSENMARK <answer>yes {i}</answer>")],
            rejected=[Message(role="assistant", content=f"REJECTEDMARK <answer>no {i}</answer>")]))
    tools = [{"type": "function", "function": {"name": "dense_search", "description": "Search the knowledge base.",
                                               "parameters": {"type": "object",
                                                              "properties": {"query": {"type": "string"}},
                                                              "required": ["query"]}}}]
    write_dpo_export(work / "dpo", pairs, tools)

    chats = [[sys_msg, Message(role="user", content=f"Question {i}?"),
              Message(role="assistant", content=f"THOUGHTMARK ANSWERMARK {i} dense_search")] for i in range(2)]
    write_chat_export(work / "chat", chats, name="agentrag_chat", description="plain chats")
    load_tokenizer("embedded").save_pretrained(str(work / "tokenizer"))
    print(f"wrote exports and tokenizer under {work}")


def _no_audio() -> None:
    """LLaMA-Factory's mm_plugin imports torchaudio at module level; PyPI's torchaudio and
    torchvision wheels are CUDA builds that cannot load against the CPU torch (and text data never
    uses them), so they are uninstalled and torchaudio is an empty module here."""
    import importlib.machinery
    import types

    mod = types.ModuleType("torchaudio")
    mod.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
    sys.modules.setdefault("torchaudio", mod)


def _count(rows: Any, prefix: str) -> tuple[int, int, list[list[int]]]:
    trained = masked = 0
    spans = []
    for labels in rows[f"{prefix}labels"]:
        trained += sum(1 for x in labels if x != -100)
        masked += sum(1 for x in labels if x == -100)
        spans.append([x for x in labels if x != -100])
    return trained, masked, spans


def load(work: Path, templates: list[str]) -> int:
    _no_audio()
    os.environ.setdefault("LLAMAFACTORY_VERBOSITY", "ERROR")  # its logger writes to stdout
    import llamafactory
    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_tokenizer

    print(f"llamafactory {llamafactory.__version__}; tokenizer {work / 'tokenizer'}")
    failures = []
    for template in templates:
        for folder, name, stage in DATASETS:
            src = work / folder / json.loads((work / folder / "dataset_info.json").read_text())[name]["file_name"]
            n_in = sum(1 for line in src.read_text().splitlines() if line.strip())
            args = {"model_name_or_path": str(work / "tokenizer"), "stage": "sft" if stage == "sft" else "dpo",
                    "do_train": True, "finetuning_type": "lora", "dataset": name, "dataset_dir": str(work / folder),
                    "template": template, "cutoff_len": 4096, "output_dir": str(work / "out"),
                    "overwrite_cache": True, "report_to": "none"}
            model_args, data_args, training_args, _, _ = get_train_args(args)
            tok_module = load_tokenizer(model_args)
            tok = tok_module["tokenizer"]
            tmpl = get_template_and_fix_tokenizer(tok, data_args)
            with contextlib.redirect_stdout(io.StringIO()):  # its own "training example" dump
                rows = get_dataset(tmpl, model_args, data_args, training_args, stage, **tok_module)["train_dataset"]
            line = f"{template:7s} {name:20s} stage={stage:3s} records {len(rows)}/{n_in} converted"
            if stage == "sft":
                trained, masked, spans = _count(rows, "")
                text = [tok.decode(s) for s in spans]
                line += f"; tokens trained {trained}, masked {masked}"
                wanted = TRAINED if name == "agentrag_sft" else ("ANSWERMARK",)
                bad = [m for m in wanted if not all(m in t for t in text)] + [OBS] * any(OBS in t for t in text)
            else:
                ct, cm, cs = _count(rows, "chosen_")
                rt, rm, rs = _count(rows, "rejected_")
                ctext, rtext = [tok.decode(s) for s in cs], [tok.decode(s) for s in rs]
                line += f"; chosen tokens trained {ct}, masked {cm}; rejected trained {rt}, masked {rm}"
                bad = (["CHOSENMARK"] * (not all("CHOSENMARK" in t for t in ctext))
                       + ["REJECTEDMARK"] * (not all("REJECTEDMARK" in t for t in rtext))
                       + [OBS] * any(OBS in t for t in ctext + rtext))
            if len(rows) != n_in:
                bad.append("dropped records")
            print(line + ("" if not bad else f"  FAIL {bad}"))
            if bad:
                failures.append((template, name, bad))
            if name == "agentrag_dpo":
                ex = rows[0]
                ids, labels = ex["chosen_input_ids"], ex["chosen_labels"]
                prompt = tok.decode([i for i, lab in zip(ids, labels, strict=True) if lab == -100])
                print("    first record, end of the prompt (masked): " + json.dumps(prompt[-160:]))
                print("    chosen (trained):   " + json.dumps(tok.decode([x for x in labels if x != -100])))
                print("    rejected (trained): " + json.dumps(tok.decode([x for x in ex["rejected_labels"]
                                                                         if x != -100])))
    print(f"{'FAILED ' + str(failures) if failures else 'all checks passed'}")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("make").add_argument("work", type=Path)
    p = sub.add_parser("load")
    p.add_argument("work", type=Path)
    p.add_argument("--template", action="append", help="LLaMA-Factory template(s); default qwen and llama3")
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.work)
        return 0
    return load(a.work, a.template or ["qwen", "llama3"])


if __name__ == "__main__":
    sys.exit(main())
