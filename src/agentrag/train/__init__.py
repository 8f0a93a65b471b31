"""Training with TRL: observation-masked SFT and DPO (see docs/export.md). torch, transformers and
trl are imported only when training starts."""

from agentrag.train.config import DPOTrainConfig, SFTTrainConfig
from agentrag.train.dpo import train_dpo
from agentrag.train.sft import train_sft

__all__ = ["SFTTrainConfig", "DPOTrainConfig", "train_sft", "train_dpo"]
