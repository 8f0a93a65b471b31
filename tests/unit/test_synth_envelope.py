"""The driver owns the rerun envelope (reuse of a finished run's output, the report's reuse, the
catch-up of a stage after its flow) and the synthesizer packages only declare it; a fifth
synthesizer is its own module plus one registry line."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

import agentrag
from agentrag.errors import UserError
from agentrag.synth import registry
from agentrag.synth.driver import Synthesizer, run_synthesizer

SYNTH = Path(agentrag.__file__).parent / "synth"
#: what only the driver may do: reuse stored outputs, filter a catch-up by what this run left unfinished
ENVELOPE = re.compile(r"\bfinished_output\b|\breuse_output\b|\.failed\(|\.derived\(|\.stored\(|\bFINISHED\b"
                      r"|def execute\(")


def synthesizer_modules() -> list[Path]:
    return sorted(p for d in SYNTH.iterdir() if d.is_dir() and (d / "__init__.py").exists() for p in d.rglob("*.py"))


def test_no_synthesizer_package_keeps_its_own_rerun_envelope() -> None:
    mods = synthesizer_modules()
    assert {p.parent.name for p in mods} >= {"ragshaper", "evipath", "reasonrag", "tracer", "annotated"}
    found = [f"{p.relative_to(SYNTH)}:{i}: {line.strip()}" for p in mods
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if ENVELOPE.search(line)]
    assert found == []


def test_the_envelope_check_sees_a_catch_up_loop(tmp_path: Path) -> None:
    """The pattern above catches what it is meant to (so the test above can fail)."""
    for line in ("return finished_output(ctx, key, run)", "todo = [q for q in items if not ctx.failed('g', q.id)]",
                 "    def execute(self, ctx, cfg, comps, inputs):", "return reuse_output(ctx.run, key, report)"):
        assert ENVELOPE.search(line), line
    assert not ENVELOPE.search("return Pipeline(steps=steps, report=report)")


def test_every_registered_synthesizer_is_a_declaration_with_one_recipe_signature() -> None:
    recipes = []
    for name in registry.SYNTHESIZERS:
        synth = registry.synthesizer(name)
        assert isinstance(synth, Synthesizer) and synth.name == name
        assert type(synth).pipeline is not Synthesizer.pipeline
        if synth.recipe is not None:
            recipes.append(synth.recipe)
            assert callable(getattr(synth.recipe, "from_config", None)), synth.recipe
    assert len(recipes) == 4
    shapes = {str(inspect.signature(r.__call__).replace(return_annotation=inspect.Signature.empty)) for r in recipes}
    assert len(shapes) == 1, shapes
    params = list(inspect.signature(recipes[0].__call__).parameters)
    assert params == ["self", "kb", "llms"]
    with pytest.raises(UserError, match="unknown synthesizer 'nope'.*ragshaper"):
        registry.synthesizer("nope")


def test_a_fifth_synthesizer_is_its_module_plus_one_registry_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.setitem(registry.SYNTHESIZERS, "toy", "toy_synth:ToySynth")  # the one line
    from toy_synth import Calls, ToyConfig

    toy = registry.synthesizer("toy")
    cfg = ToyConfig(words=["ab", "cde", "f"])
    out = tmp_path / "run"

    calls = Calls(down={"cde"})  # its count call hits an outage: left unfinished, not retried by the catch-up
    m1 = run_synthesizer(toy, cfg, out, calls=calls)
    assert m1["synthesizer"] == "toy" and m1["unfinished"] == 1 and m1["unfinished_by_stage"] == {"count": 1}
    assert calls.seen.count(("count", "cde")) == 1 and calls.seen.count(("upper", "cde")) == 1
    assert [(r["stage"], r["in"], r["out"]) for r in m1["funnel"]] == [("upper", 3, 3), ("count", 3, 2)]
    assert (out / "report.md").exists() and "total length 3" in (out / "report.md").read_text()

    calls = Calls()  # the rerun: no upper call (done); the count catch-up finishes the word left over
    m2 = run_synthesizer(toy, cfg, out, calls=calls)
    assert calls.seen == [("count", "cde")]
    assert m2["unfinished"] == 0 and m2["total_length"] == 6

    calls = Calls()  # a no-op rerun: the finished output is reused, no stage runs, no stage file opens
    built = []
    monkeypatch.setattr(type(toy), "pipeline", lambda *a: built.append(a))
    m3 = run_synthesizer(toy, cfg, out, calls=calls)
    assert built == [] and calls.seen == [] and m3["funnel"] == m2["funnel"] and m3["total_length"] == 6
    assert "toy_synth" in sys.modules

    from agentrag.report.viewer.detect import detect_run_kind
    from agentrag.report.viewer.header import key_config, run_header

    assert detect_run_kind(out) == "toy" and key_config("toy") == ("words",)  # the viewer reads its facts
    assert ["config", "words=ab, cde, f"] in run_header("toy", {"words": ["ab", "cde", "f"]}, m3)
