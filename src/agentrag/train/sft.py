"""Observation-masked SFT with TRL's ``SFTTrainer`` (RAGShaper §3.4, Eq. 9).

Each TRL conversational record is tokenized with TRL's ChatML training template and its
``{% generation %}`` assistant mask (:func:`agentrag.export.masking.assistant_mask`), and the
mask becomes the labels (-100 elsewhere). This is what ``SFTConfig(assistant_only_loss=True,
chat_template_path=qwen2_5_training.jinja)`` does inside TRL; doing it here first keeps tool-call
arguments as the JSON objects they are (an Arrow table would merge the argument keys of all
records and render the missing ones as ``null``) and trains on exactly the mask the tests check.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

from agentrag._extras import require
from agentrag.errors import RunError, UserError
from agentrag.export.masking import assistant_mask, training_chat_template
from agentrag.export.sft import read_trl_records
from agentrag.paths import check_out_dir
from agentrag.progress import Progress, ProgressArg, progress_for
from agentrag.runs import RunDir
from agentrag.train.config import SFTTrainConfig, TrainConfig
from agentrag.train.model import check_model, load_tokenizer, load_trainable_model

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint"


def tokenize_sft(records: list[dict[str, Any]], tokenizer: Any, max_length: int) -> list[dict[str, list[int]]]:
    """``input_ids`` and ``labels`` (non-assistant tokens -100) per record; cut at ``max_length``."""
    rows = []
    for i, rec in enumerate(records):
        toks = assistant_mask(rec, tokenizer)
        ids, mask = toks.input_ids[:max_length], toks.assistant_mask[:max_length]
        if not any(mask):
            log.warning("record %d has no assistant token within max_length=%d; skipped", i, max_length)
            continue
        rows.append({"input_ids": ids, "labels": [t if m else -100 for t, m in zip(ids, mask, strict=True)]})
    if not rows:
        raise UserError(f"no record has an assistant token within max_length={max_length}; raise max_length")
    return rows


def trainer_args(cls: Any, out: Path, cfg: TrainConfig, **extra: Any) -> Any:
    """TRL config (SFTConfig or DPOConfig) from our config: CPU-friendly defaults, no hub, no reports."""
    return cls(
        output_dir=str(out / "trainer"), max_steps=cfg.max_steps, num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.grad_accum,
        learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps, logging_steps=cfg.logging_steps,
        save_strategy="no", report_to=[], bf16=False, fp16=False, seed=cfg.seed,
        max_length=cfg.max_length, dataloader_num_workers=0, dataloader_pin_memory=False, disable_tqdm=True,
        gradient_checkpointing=cfg.gradient_checkpointing, **extra,
    )




def progress_callbacks(progress: Progress | None) -> list[Any]:
    """A transformers ``TrainerCallback`` that reports ``("train", step, max_steps)`` after each
    optimizer step (the CLI turns it into a bar, or into log lines with rate and ETA)."""
    if progress is None:
        return []
    report: Progress = progress
    from transformers import TrainerCallback

    class _Steps(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            report("train", int(state.global_step), int(state.max_steps))

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            report("train", int(state.global_step), int(state.max_steps))

    return [_Steps()]


def finished_run(out: str | os.PathLike[str], cfg: TrainConfig, data: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The metrics of a finished run in ``out`` with the same config and data (rerun = resume), else None."""
    import json

    import yaml

    from agentrag.config import dump_config

    run = Path(out)
    try:
        metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
        # the GGUF export is no training setting: adding or changing it does not retrain
        saved = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
        same = _without_export(saved) == _without_export(yaml.safe_load(dump_config(cfg)))
    except (OSError, ValueError):
        return None
    if not same or metrics.get("data") != str(data) or not metrics.get("finite"):
        return None
    if cfg.save_model and not (run / CHECKPOINT / "config.json").exists():
        return None
    log.info("%s already holds a finished run with this config and data; delete it to train again", run)
    return dict(metrics)


def _without_export(cfg: Any) -> Any:
    return {k: v for k, v in cfg.items() if k != "export_gguf"} if isinstance(cfg, dict) else cfg


def export_gguf(out: str | os.PathLike[str], cfg: TrainConfig, metrics: dict[str, Any]) -> dict[str, Any]:
    """With ``cfg.export_gguf``: write ``OUT/checkpoint.<quant>.gguf`` unless it exists, and record it in
    ``metrics.json``; the metrics either way."""
    if cfg.export_gguf is None:
        return metrics
    from agentrag.train.gguf import gguf_path, write_gguf

    run = Path(out)
    path = gguf_path(run, cfg.export_gguf)
    if not (run / CHECKPOINT / "config.json").is_file():
        raise UserError(f"export_gguf={cfg.export_gguf!r} needs the checkpoint; set save_model: true")
    if not path.exists():
        reference = Path(cfg.model) if Path(cfg.model).suffix == ".gguf" else None
        write_gguf(run / CHECKPOINT, path, cfg.export_gguf, reference=reference)
    if metrics.get("gguf") != str(path):
        metrics = {**metrics, "gguf": str(path), "gguf_quant": cfg.export_gguf}
        RunDir(run).write_json("metrics.json", metrics)
    return metrics


def finish(trainer: Any, tokenizer: Any, run: RunDir, cfg: TrainConfig, extra: dict[str, Any]) -> dict[str, Any]:
    """Collect losses, check they are finite, save the checkpoint and ``metrics.json``."""
    losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    metrics: dict[str, Any] = {
        "global_step": trainer.state.global_step, "losses": losses,
        "final_loss": losses[-1] if losses else None,
        "finite": bool(losses) and all(math.isfinite(x) for x in losses), **extra,
    }
    if cfg.save_model:
        ckpt = run.file(CHECKPOINT)
        trainer.save_model(str(ckpt))
        tokenizer.save_pretrained(str(ckpt))
        metrics["checkpoint"] = str(ckpt)
    run.write_json("metrics.json", metrics)
    if not metrics["finite"]:
        raise RunError(f"training loss is not finite: {losses}; lower learning_rate or check the data")
    return metrics


def train_sft(data: str | os.PathLike[str], out: str | os.PathLike[str],
              config: SFTTrainConfig | None = None, progress: ProgressArg = None) -> dict[str, Any]:
    """Fine-tune on a TRL SFT JSONL file (from ``agentrag export sft``); returns the metrics.
    ``progress``: heartbeat lines on stderr (``True``; by default when the session is interactive),
    none (``False``), or a callback ``progress(stage, done, total)`` that hears of the model load
    and every optimizer step (:mod:`agentrag.progress`)."""
    cfg = config or SFTTrainConfig()
    check_out_dir(out)
    records = read_trl_records(data)
    done = finished_run(out, cfg, data)
    if done is not None:
        return export_gguf(out, cfg, done)
    check_model(cfg.model)
    for module in ("torch", "transformers", "trl", "datasets"):
        require(module, "train", purpose="SFT training")
    run = RunDir(out)
    run.write_config(cfg)

    with progress_for(progress) as reporter:
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer

        beat: Progress = reporter or (lambda stage, done, total: None)
        beat("load model", 0, 1)  # a heartbeat while the checkpoint loads, before the first step
        tokenizer = load_tokenizer(cfg.model)
        tokenizer.chat_template = training_chat_template()  # the checkpoint speaks ChatML with tools
        rows = tokenize_sft(records, tokenizer, cfg.max_length)
        n_trained = sum(sum(1 for x in r["labels"] if x != -100) for r in rows)
        n_tokens = sum(len(r["input_ids"]) for r in rows)
        log.info("SFT on %d records: %d tokens, %d trained (%.0f%%)", len(rows), n_tokens, n_trained,
                 100 * n_trained / n_tokens)
        args = trainer_args(SFTConfig, Path(out), cfg, packing=False, completion_only_loss=False,
                            assistant_only_loss=False)
        model = load_trainable_model(cfg.model)
        beat("load model", 1, 1)
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                             processing_class=tokenizer, callbacks=progress_callbacks(beat))
        result = trainer.train()
        metrics = finish(trainer, tokenizer, run, cfg, {
            "train_seconds": result.metrics.get("train_runtime"), "records": len(rows), "tokens": n_tokens,
            "trained_tokens": n_trained, "data": str(data)})
    return export_gguf(out, cfg, metrics)


__all__ = ["tokenize_sft", "train_sft", "progress_callbacks", "export_gguf"]
