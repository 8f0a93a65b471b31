"""docs/dev/architecture.md matches the code: every module it names exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "dev" / "architecture.md"
MODULE = re.compile(r"`(agentrag(?:\.[a-z_][a-z0-9_]*)*)`")


def named_modules(text: str) -> list[str]:
    return sorted(set(MODULE.findall(text)))


def test_every_module_the_architecture_map_names_exists() -> None:
    names = named_modules(DOC.read_text(encoding="utf-8"))
    assert len(names) >= 40  # the map names the layers, each paper's modules and the run's path
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    assert missing == []


def test_the_check_sees_a_missing_module() -> None:
    names = named_modules("the driver `agentrag.synth.driver` and `agentrag.synth.nowhere`, not `Pipeline`")
    assert names == ["agentrag.synth.driver", "agentrag.synth.nowhere"]
    assert importlib.util.find_spec("agentrag.synth.nowhere") is None


def test_every_registered_synthesizer_is_on_the_map() -> None:
    from agentrag.synth.registry import SYNTHESIZERS

    names = named_modules(DOC.read_text(encoding="utf-8"))
    assert [n for n in SYNTHESIZERS if f"agentrag.synth.{n}" not in names] == []
