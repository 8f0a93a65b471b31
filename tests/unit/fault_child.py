"""Run one fault-matrix world's command as the ``agentrag`` program, in its own process, so a test
can SIGKILL or Ctrl-C it: ``python fault_child.py WORLD ARGV_JSON``. The world's patches (a fake
retriever or embedder: :data:`test_fault_disk_synth.PATCHES`) are applied first, and the installed
embedded models are hidden as in every unit test; the command talks to the test's stub server
through the LLM reference in its arguments."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    world, argv = sys.argv[1], json.loads(sys.argv[2])
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    from conftest import MODEL_PACKAGES

    for name in MODEL_PACKAGES:
        sys.modules[name] = None  # type: ignore[assignment]
    import pytest
    from test_fault_disk_synth import PATCHES
    from test_fault_matrix import patch_eval

    {"eval": patch_eval, **PATCHES}[world](pytest.MonkeyPatch())
    sys.argv = ["agentrag", *argv]
    from agentrag.cli.main import main as agentrag_main

    agentrag_main()


if __name__ == "__main__":
    main()
