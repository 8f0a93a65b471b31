"""What a synthesizer command prints at its end: the funnel, and when it ends empty, which stage
emptied it, its top rejection reason and the setting or model change that addresses it; output
paths only for files that were written."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrag.cli.common import console, styled

#: advice per rejection reason (exact name); the most common reasons of each synthesizer
REASON_HINTS: dict[str, str] = {
    "context_limit": "requests went over the model's context window: raise the LLM's n_ctx (a key of an "
                     "--llm YAML file) or use a model with a longer context",
    "explanation_answer": "the model wrote explanations where a short answer was asked: a stronger "
                          "instruction-following --llm (e.g. a 7B+ instruct model)",
    "answer_too_long": "answers longer than qa.max_answer_words: raise qa.max_answer_words or use a stronger --llm",
    "min_gap": "sibling values closer than pairs.min_gap: lower pairs.min_gap, or more mcts.iterations / "
               "value.rollouts so values separate",
    "same_action": "siblings took the same action: raise mcts.max_children or mcts.temperature",
    "same_response": "siblings wrote the same text: raise mcts.temperature or mcts.max_children",
    "answerless": "no leaf reached an answer: raise mcts.max_iter or mcts.iterations, or a stronger --llm",
    "flagged": "node outputs were flagged (did not parse): a stronger --llm, or raise mcts.max_tokens",
    "malformed": "node outputs were malformed turns (unclosed, mis-cased or nested tags, an answer then a query): "
                 "a stronger --llm, or raise mcts.max_tokens when tags were cut off",
    "near_duplicate": "siblings took the same action in other words: raise mcts.temperature or mcts.max_children",
    "eq6_floor": "sub-answers too far from the evidence (gates.eq6_floor): lower it, or a stronger --llm",
    "sub_answer_unsupported": "sub-answers not supported by the evidence: a stronger --llm",
    "answer_not_supported": "answers not supported by the documents: a stronger --llm",
}

#: advice by a word in the reason's name, when no exact entry matches
WORD_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("parse", "format", "malformed", "json", "invalid", "schema"),
     "the model's output did not parse: a stronger --llm (an instruct model of 7B+), or raise that stage's "
     "max_tokens (--print-config lists the keys)"),
    (("max_tokens", "cut", "truncat", "length"), "output cut off: raise that stage's max_tokens (--print-config)"),
    (("f1", "filter"), "trajectories fail the answer filter: a stronger --teacher, or lower f1_threshold "
                       "(the paper: 0.9)"),
    (("support", "evidence", "gold"), "the evidence does not support the output: a stronger --llm, or a KB "
                                      "that holds the gold passages"),
    (("answer", "question"), "the model's questions or answers fail the gates: a stronger --llm"),
)

DEFAULT_HINT = ("a stronger --llm (the embedded 135M model fails most gates), or more input "
                "(--limit, --seeds)")


#: an option a hint names, and the one to name instead on a command without it
FALLBACK_OPTIONS = {"--teacher": "--llm", "--judge": "--llm"}
#: what a hint says for an option the command lacks, when no fallback option exists either
MISSING_OPTION_WORDS = {"--llm": "model", "--teacher": "teacher model", "--judge": "judge model"}
#: the options that give a synthesizer its input, in the order they are named
INPUT_OPTIONS = ("--dataset", "--seeds", "--kb", "--limit")


def fit_options(hint: str, options: Collection[str] | None) -> str:
    """``hint`` naming only options of the command (``options``; None: any): an option it lacks
    gives way to its fallback (``--teacher`` -> ``--llm``) or leaves a parenthesised list."""
    if options is None:
        return hint
    for opt, alt in FALLBACK_OPTIONS.items():
        if opt not in options and alt in options:
            hint = re.sub(re.escape(opt) + r"(?![\w-])", alt, hint)
    for opt, word in MISSING_OPTION_WORDS.items():
        if opt not in options:
            hint = re.sub(re.escape(opt) + r"(?![\w-])", word, hint)

    def keep(m: re.Match[str]) -> str:
        items = [x for x in m.group(1).split(", ") if x.split()[0] in options]
        return f"({', '.join(items)})" if items else ""

    hint = re.sub(r"\(((?:--[\w-]+(?:, )?)+)\)", keep, hint)
    return re.sub(r"\s+or more input\s*$|,? or more input \(\)", "", hint).strip()


def default_hint(options: Collection[str] | None = None) -> str:
    return fit_options(DEFAULT_HINT, options)


_SETTING = re.compile(r"\b([a-z_]{2,})\.[a-z_]{2,}\b")


def hint_for(reason: str, options: Collection[str] | None = None, sections: Collection[str] | None = None) -> str:
    """The advice for a rejection ``reason``, naming only the command's ``options`` and, when the
    run's config ``sections`` are given, only its settings: two synthesizers may name a reason
    alike ("malformed"), and advice naming another one's settings (``mcts.max_tokens``) is skipped."""
    hint = REASON_HINTS.get(reason)
    if hint is not None and (sections is None or all(m.group(1) in sections for m in _SETTING.finditer(hint))):
        return fit_options(hint, options)
    low = reason.lower()
    for words, hint in WORD_HINTS:
        if any(w in low for w in words):
            return fit_options(hint, options)
    return default_hint(options)


def command_options() -> set[str] | None:
    """The option names of the command being run (None outside a command)."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    return {o for p in ctx.command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
            if o.startswith("--")}


def empty_stage(funnel: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The stage that ended the funnel at 0: the first with input and no output, when the last
    stage with any input put out nothing; None when the funnel ends with output."""
    fed = [r for r in funnel if int(r.get("in", 0)) > 0]
    if not fed or not funnel or int(funnel[-1].get("out", 0)) > 0:
        return None
    return next((r for r in fed if int(r.get("out", 0)) == 0), fed[-1])


def explain_empty(funnel: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None = None,
                  options: Collection[str] | None = None) -> list[str]:
    """The closing lines of a run whose funnel ended at 0 (none otherwise); the advice names only
    ``options`` (the command's; None: any)."""
    row = empty_stage(funnel)
    if row is None:
        if funnel and all(int(r.get("in", 0)) == 0 for r in funnel):
            given = [o for o in INPUT_OPTIONS if options is None or o in options]
            check = f" (check {', '.join(given)})" if given else ""
            return [f"nothing was produced: no stage had any input{check}"]
        return []
    stage, rejected = str(row.get("stage")), dict(row.get("rejected") or {})
    lines = [f"nothing was produced: stage '{stage}' ended at 0 ({row.get('in')} in, 0 out)."]
    if rejected:
        reason, count = max(rejected.items(), key=lambda kv: kv[1])
        lines.append(f"  top rejection: {reason} ({count} of {row.get('in')})")
        sections = set(config) if config is not None else None
        lines.append(f"  what helps: {hint_for(reason, options, sections)}")
    elif int(row.get("unfinished", 0)):
        lines.append(f"  {row['unfinished']} items unfinished at this stage: rerun the same command to finish them")
    else:
        lines.append(f"  no rejection recorded; what helps: {default_hint(options)}")
    if config is not None and isinstance(config.get(stage), dict):
        lines.append(f"  this stage's settings: {stage}.* (agentrag ... --print-config shows them)")
    return lines


def print_funnel(funnel: Sequence[Mapping[str, Any]]) -> None:
    """One line per stage of a synthesizer's funnel (``metrics.json``): in -> out, rejections by
    reason, and the items an outage left unfinished; stage names padded to the longest."""
    width = max((len(str(row["stage"])) for row in funnel), default=0)
    units = {row.get("unit") or "items" for row in funnel}
    before = None
    for row in funnel:
        rej = ", ".join(f"{k}: {v}" for k, v in row["rejected"].items())
        left = f"  unfinished: {row['unfinished']}" if row.get("unfinished") else ""
        unit = row.get("unit") or "items"
        # where the counted thing changes (items -> sub-questions), "in" is not the "out" above: say so
        what = f"[{unit}] " if len(units) > 1 and unit != before else ""
        before = unit
        console.print(f"  {row['stage']:<{width}} {row['in']:>5} -> {row['out']:<5} {what}{rej}{left}", markup=False)


def print_empty_funnel(metrics: Mapping[str, Any], out: Path) -> bool:
    """Print :func:`explain_empty` in yellow (the run's config read from ``out/config.yaml``);
    returns whether the funnel was empty."""
    import yaml

    cfg_path = out / "config.yaml"
    config = yaml.safe_load(cfg_path.read_text(encoding="utf-8")) if cfg_path.exists() else None
    lines = explain_empty(metrics.get("funnel") or [], config if isinstance(config, dict) else None,
                          command_options())
    for line in lines:
        console.print(styled((line, "yellow")), soft_wrap=True)
    return bool(lines)


def written(*paths: Path | str) -> list[str]:
    """The paths among ``paths`` that exist as non-empty files (what may be printed as output)."""
    return [str(p) for p in paths if Path(p).is_file() and Path(p).stat().st_size > 0]


def print_outputs(label_paths: Sequence[tuple[str, Path | str]]) -> None:
    """``label: path`` for each written file, on one line (none: nothing is printed)."""
    shown = [f"{label}: {p}" for label, p in label_paths if written(p)]
    if shown:
        console.print("   ".join(shown), soft_wrap=True)


__all__ = ["explain_empty", "empty_stage", "hint_for", "fit_options", "command_options", "print_funnel", "print_empty_funnel", "print_outputs", "written",
           "REASON_HINTS"]
