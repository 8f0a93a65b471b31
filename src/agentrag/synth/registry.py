"""The synthesizers agentrag knows, one line each: ``name -> "module:Class"`` of its
:class:`~agentrag.synth.driver.Synthesizer` declaration. A new synthesizer is its own package
(the declaration, its stages, its recipe, its report) plus one line here; the driver runs it like
the others. Declarations are imported on use (no import-time cost for the rest of the package)."""

from __future__ import annotations

import importlib
from typing import Any

from agentrag.errors import UserError

SYNTHESIZERS: dict[str, str] = {
    "ragshaper": "agentrag.synth.ragshaper.run:RagShaperSynth",
    "reasonrag": "agentrag.synth.reasonrag.run:ReasonRagSynth",
    "evipath": "agentrag.synth.evipath.run:EviPathSynth",
    "tracer": "agentrag.synth.tracer.run:TracerSynth",
    "annotated": "agentrag.synth.annotated.run:AnnotatedSynth",
}


def synthesizer_class(name: str) -> type[Any]:
    """The declaration class registered as ``name``; a UserError listing the names otherwise."""
    where = SYNTHESIZERS.get(name)
    if where is None:
        raise UserError(f"unknown synthesizer {name!r}; the synthesizers: {', '.join(SYNTHESIZERS)}")
    module, _, cls = where.partition(":")
    return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]


def synthesizer(name: str) -> Any:
    """A fresh declaration (:class:`~agentrag.synth.driver.Synthesizer`) of the synthesizer ``name``."""
    return synthesizer_class(name)()


__all__ = ["SYNTHESIZERS", "synthesizer", "synthesizer_class"]
