"""Training configs (``agentrag train sft|dpo --config x.yaml --set key=value``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentrag.config import Config


class TrainConfig(Config):
    """Settings shared by SFT and DPO training."""

    model: str = Field(default="embedded", description="'embedded' (SmolLM2 GGUF), a .gguf file or a HF model directory")
    max_steps: int = Field(default=-1, description="optimizer steps; -1 = run `epochs` epochs")
    epochs: float = 1.0
    batch_size: int = Field(default=2, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    learning_rate: float = Field(default=1e-5, gt=0)
    warmup_steps: int = Field(default=0, ge=0)
    max_length: int = Field(default=2048, ge=16, description="tokens per sequence; longer ones are cut at the end")
    seed: int = 0
    logging_steps: int = Field(default=1, ge=1)
    save_model: bool = Field(default=True, description="write the final model + tokenizer into <out>/checkpoint")
    gradient_checkpointing: bool = False
    export_gguf: Literal["q8_0", "f16"] | None = Field(
        default=None, description="also write the checkpoint as GGUF for llama.cpp (OUT/checkpoint.<quant>.gguf; "
        "run it with --llm embedded:PATH): q8_0 (8-bit) or f16; Llama-architecture checkpoints with SmolLM2's "
        "tokenizer")


class SFTTrainConfig(TrainConfig):
    """SFT with observation masking: only assistant tokens are trained (RAGShaper Eq. 9)."""

    learning_rate: float = Field(default=1e-5, gt=0)


class DPOTrainConfig(TrainConfig):
    """DPO on preference pairs (TRL conversational prompt/chosen/rejected)."""

    learning_rate: float = Field(default=5e-7, gt=0)
    beta: float = Field(default=0.1, gt=0)


__all__ = ["TrainConfig", "SFTTrainConfig", "DPOTrainConfig"]
