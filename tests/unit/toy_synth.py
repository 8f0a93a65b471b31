"""A toy fifth synthesizer, declared the way the four papers' are: this module plus one line in
:data:`agentrag.synth.registry.SYNTHESIZERS` is all it takes (tests/unit/test_synth_envelope.py).

Words go through two stages, each an append-only stage file: ``upper`` (the word in capitals)
and ``count`` (its length), run as one flow (a word's count starts as soon as its upper record is
written), then the catch-up of ``count`` for words whose upper record an earlier run wrote. The
driver does the rest: checks, run directory, failure policy, rerun reuse, metrics and report."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from agentrag.config import Config
from agentrag.errors import LLMError
from agentrag.records import Record
from agentrag.runs import RunDir, config_key
from agentrag.synth.driver import PendingStage, Pipeline, Stage, Synthesizer, SynthOutput, SynthRun


class ToyConfig(Config):
    words: list[str]


class Word(Record):
    id: str
    text: str


class Calls:
    """What the toy's components record: the calls per stage and word; ``down``: words whose
    ``count`` call hits an outage (an LLM endpoint that does not answer)."""

    def __init__(self, down: set[str] | None = None) -> None:
        self.down = set(down or ())
        self.seen: list[tuple[str, str]] = []

    def upper(self, word: Word) -> Word:
        self.seen.append(("upper", word.id))
        return Word(id=word.id, text=word.text.upper())

    def count(self, word: Word) -> Word:
        self.seen.append(("count", word.id))
        if word.id in self.down:
            raise LLMError("HTTP 503 from the toy endpoint", is_retryable=True)
        return Word(id=word.id, text=str(len(word.text)))


class ToySynth(Synthesizer[ToyConfig, list[Word], Calls]):
    """Words -> capitals -> lengths."""

    name = "toy"
    given = ("calls",)
    stages = (Stage("upper", "words", "upper.jsonl", about="the word in capitals"),
              Stage("count", "upper.jsonl", "count.jsonl", about="its length"))
    run_files = ("upper.jsonl", "count.jsonl")  # how the run viewer tells a toy run directory
    key_config = ("words",)

    def check_inputs(self, cfg: ToyConfig, out: str | os.PathLike[str], given: Mapping[str, Any]) -> list[Word]:
        return [Word(id=w, text=w) for w in cfg.words]

    def components(self, cfg: ToyConfig, run: RunDir, inputs: list[Word], given: Mapping[str, Any]) -> Calls:
        return given["calls"]  # type: ignore[no-any-return]

    def llm_roles(self, comps: Calls) -> dict[str, Any]:
        return {}

    def concurrency(self, cfg: ToyConfig) -> int:
        return 1

    def finished_key(self, cfg: ToyConfig, inputs: list[Word]) -> str:
        return config_key(cfg)

    def pipeline(self, ctx: SynthRun, cfg: ToyConfig, comps: Calls, inputs: list[Word]) -> Pipeline:
        upper, count = ctx.run.stage_file("upper", Word), ctx.run.stage_file("count", Word)

        def write_upper(_word: Word, rec: Word) -> list[tuple[str, Any]]:
            upper.append(rec)
            return [("count", rec)]

        def write_count(_word: Word, rec: Word) -> None:
            count.append(rec)

        def flow() -> None:
            ctx.flow({"upper": (comps.upper, write_upper), "count": (comps.count, write_count)},
                     [("upper", w) for w in inputs if w.id not in upper])

        catch_up = PendingStage("count", comps.count, lambda: [w for w in upper if w.id not in count], write_count)

        def report() -> SynthOutput:
            n_upper, n_count = len(upper), len(count)
            return SynthOutput(counts={"upper": (len(inputs), n_upper, {}), "count": (n_upper, n_count, {})},
                               details={"total_length": sum(int(r.text) for r in count)})
        return Pipeline(steps=[flow, catch_up], report=report, report_key=lambda: config_key(cfg))

    def report_sections(self, metrics: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"title": "Toy", "text": f"total length {metrics['total_length']}"}]
