"""Where the benchmarks find the shared data (``$AGENTRAG_SHARED``, set by the Makefile, or the
repository's sibling ``../shared``), and the files they read when run without arguments."""

from __future__ import annotations

import os
from pathlib import Path

DATA = Path(os.environ.get("AGENTRAG_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "data"
#: the held-out multi-hop files the KB defaults were chosen on
RECALL_FILES = [DATA / "hotpotqa" / "dev_distractor_200.jsonl", DATA / "musique" / "train_100.jsonl"]
