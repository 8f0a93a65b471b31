"""``agentrag train``: SFT and DPO with TRL on exported data (CPU works for the embedded model)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentrag.cli.common import ConfigOpt, SetOpt, alias, console, pick, resolve_config, user_errors
from agentrag.cli.progress import progress_output

train_app = typer.Typer(help="Fine-tune a model on exported data: observation-masked SFT, or DPO.",
                        no_args_is_help=True)

DataOpt = Annotated[Path, typer.Option("--data", "-d", help="Training JSONL (from `agentrag export`).")]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="'embedded' (SmolLM2 GGUF, dequantized), a .gguf file or a Hugging "
                 "Face model directory. Default: embedded."),
]
#: ``-m`` is --llm in every command; train's old ``-m`` for --model keeps working, unlisted
ModelAlias = Annotated[str | None, alias("-m", of="--model")]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Output directory (checkpoint, metrics, config.yaml).")]
GgufOpt = Annotated[
    str | None,
    typer.Option("--gguf", help="Also write the checkpoint as GGUF for llama.cpp, OUT/checkpoint.<QUANT>.gguf "
                 "(q8_0 or f16); run it with --llm embedded:PATH. Config key: export_gguf. Default: none."),
]
StepsOpt = Annotated[int | None, typer.Option("--max-steps", help="Optimizer steps (default: one epoch).")]


def _report(metrics: dict[str, object]) -> None:
    console.print(f"steps {metrics['global_step']}  final loss {metrics['final_loss']}  "
                  f"checkpoint {metrics.get('checkpoint', '(not saved)')}")
    if metrics.get("gguf"):
        console.print(f"gguf {metrics['gguf']} ({metrics.get('gguf_quant')}): --llm embedded:{metrics['gguf']}")


@train_app.command("sft")
def sft(data: DataOpt, out: OutOpt, model: ModelOpt = None, max_steps: StepsOpt = None,
        gguf: GgufOpt = None, config: ConfigOpt = None, set_: SetOpt = None,
        model_alias: ModelAlias = None) -> None:
    """Supervised fine-tuning on trl_sft.jsonl with the ChatML training template: only assistant
    tokens (thoughts, tool calls, answers) are trained; tool observations and prompts are masked."""
    with user_errors():
        from agentrag.train.config import SFTTrainConfig
        from agentrag.train.sft import train_sft

        cfg = resolve_config(SFTTrainConfig, config, set_, base={"model": pick(model, model_alias, "--model", "-m"),
                                                                 "max_steps": max_steps,
                                                                 "export_gguf": gguf})
        with progress_output() as progress:
            metrics = train_sft(data, out, cfg, progress=progress)
        _report(metrics)


@train_app.command("dpo")
def dpo(data: DataOpt, out: OutOpt, model: ModelOpt = None, max_steps: StepsOpt = None,
        gguf: GgufOpt = None, config: ConfigOpt = None, set_: SetOpt = None,
        model_alias: ModelAlias = None) -> None:
    """Direct preference optimization on trl_dpo.jsonl (prompt/chosen/rejected chats) with TRL's
    DPOTrainer and the ChatML template."""
    with user_errors():
        from agentrag.train.config import DPOTrainConfig
        from agentrag.train.dpo import train_dpo

        cfg = resolve_config(DPOTrainConfig, config, set_, base={"model": pick(model, model_alias, "--model", "-m"),
                                                                 "max_steps": max_steps,
                                                                 "export_gguf": gguf})
        with progress_output() as progress:
            metrics = train_dpo(data, out, cfg, progress=progress)
        _report(metrics)


def register(app: typer.Typer) -> None:
    app.add_typer(train_app, name="train")
