"""DPO with TRL's ``DPOTrainer`` on conversational preference records (``agentrag export dpo``).

The tokenizer gets TRL's ChatML template (SmolLM2's stock template cannot render tool calls).
Records go in as an iterable dataset built from Python objects, so tool-call arguments keep
their own keys (an Arrow table would merge the keys of all records and render missing ones
as ``null``); the step count is therefore always fixed up front.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentrag._extras import require
from agentrag.exec import Progress
from agentrag.export.dpo import read_trl_dpo
from agentrag.export.masking import training_chat_template
from agentrag.paths import check_out_dir
from agentrag.progress import ProgressArg, progress_for
from agentrag.runs import RunDir
from agentrag.train.config import DPOTrainConfig
from agentrag.train.model import check_model, load_tokenizer, load_trainable_model
from agentrag.train.sft import export_gguf, finish, finished_run, progress_callbacks, trainer_args

log = logging.getLogger(__name__)


def planned_steps(n_records: int, cfg: DPOTrainConfig) -> int:
    """``max_steps`` when set, else the steps of ``epochs`` passes over ``n_records``."""
    if cfg.max_steps > 0:
        return cfg.max_steps
    return max(1, math.ceil(cfg.epochs * n_records / (cfg.batch_size * cfg.grad_accum)))


def train_dpo(data: str | os.PathLike[str], out: str | os.PathLike[str],
              config: DPOTrainConfig | None = None, progress: ProgressArg = None) -> dict[str, Any]:
    """DPO on a TRL preference JSONL file; returns the metrics (losses, steps, checkpoint)."""
    cfg = config or DPOTrainConfig()
    check_out_dir(out)
    records = read_trl_dpo(data)
    done = finished_run(out, cfg, data)
    if done is not None:
        return export_gguf(out, cfg, done)
    check_model(cfg.model)
    for module in ("torch", "transformers", "trl", "datasets"):
        require(module, "train", purpose="DPO training")
    run = RunDir(out)
    run.write_config(cfg)

    with progress_for(progress) as reporter:
        from datasets import IterableDataset
        from trl import DPOConfig, DPOTrainer

        def rows() -> Iterator[dict[str, Any]]:
            while True:  # cycled; the trainer stops at max_steps
                for r in records:
                    yield {k: v for k, v in r.items() if k != "tools" or v}

        beat: Progress = reporter or (lambda stage, done, total: None)
        beat("load model", 0, 1)  # a heartbeat while the checkpoint loads, before the first step
        tokenizer = load_tokenizer(cfg.model)
        tokenizer.chat_template = training_chat_template()
        steps = planned_steps(len(records), cfg)
        args = trainer_args(DPOConfig, Path(out), cfg.model_copy(update={"max_steps": steps}), beta=cfg.beta)
        model = load_trainable_model(cfg.model)
        beat("load model", 1, 1)
        trainer = DPOTrainer(model=model, args=args, train_dataset=IterableDataset.from_generator(rows),
                             processing_class=tokenizer, callbacks=progress_callbacks(beat))
        result = trainer.train()
        metrics = finish(trainer, tokenizer, run, cfg, {
            "train_seconds": result.metrics.get("train_runtime"), "records": len(records), "data": str(data),
            "beta": cfg.beta})
    return export_gguf(out, cfg, metrics)


__all__ = ["planned_steps", "train_dpo"]
