"""Exports for training: SFT (TRL messages + tools, LLaMA-Factory sharegpt) and DPO (TRL,
LLaMA-Factory sharegpt/alpaca ranking), with observation masking (see docs/export.md)."""

from agentrag.export.dpo import to_alpaca_dpo, to_sharegpt_dpo, to_trl_dpo, write_dpo_export
from agentrag.export.masking import assistant_mask
from agentrag.export.sft import to_sharegpt, to_trl_records, write_sft_export

__all__ = ["to_trl_records", "to_sharegpt", "write_sft_export", "to_trl_dpo", "to_sharegpt_dpo",
           "to_alpaca_dpo", "write_dpo_export", "assistant_mask"]
