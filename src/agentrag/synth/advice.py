"""Why a synthesizer run produced nothing (or little), in its report and on the terminal.

An *empty* run's funnel ends at 0; a *near-empty* one has a stage that kept under
:data:`NEAR_EMPTY` (10%) of at least :data:`NEAR_EMPTY_MIN_IN` items it was given. The explanation
names that stage, its top rejection reasons with counts, and advice. Every piece of advice here
is tested to help: ``tests/unit/test_synth_advice.py`` follows each one on a scripted-model run
and shows the stage's output rise. A reason without tested advice gets none (the explanation
says where the rejected records are), never a guess: "raise max_tokens" was dropped because
following it did not help (the embedded model's malformed turns were not cut off).

The funnel's counts add up stage to stage: each stage's ``in`` is the ``out`` of the stage that
feeds it (:func:`feeder`: the latest earlier stage whose declared output this stage reads; less the
items an outage left unfinished there), or the stage counts another unit (sub-questions of items, sibling pairs of trees) and
says so; :func:`funnel_breaks` lists the stages where that does not hold.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

#: a stage is near-empty when it keeps less than this share of its input ...
NEAR_EMPTY = 0.10
#: ... and was given at least this many items (2 of 3 rejected is no pattern)
NEAR_EMPTY_MIN_IN = 10
#: how many rejection reasons the explanation lists
TOP_REASONS = 3

#: tested advice per rejection reason (exact name): each is followed in tests/unit/test_synth_advice.py
REASON_HINTS: dict[str, str] = {
    "min_gap": "sibling values closer than pairs.min_gap: lower pairs.min_gap",
    "support_retrieved": "the supporting page was not retrieved, or was cut before the hop's answer: raise top_k "
                         "or doc_chars (what the agent is shown), or build --kb from the same training files",
}

#: tested advice by a word in the reason's name, when no exact entry matches: the model's output
#: failed to parse or failed the gates; a model that follows the instructions helps
WORD_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("parse", "format", "malformed", "flagged", "json", "invalid", "schema", "answer", "question", "explanation"),
     "the model's output did not parse or failed the gates: a stronger --llm (an instruct model of 7B+; the "
     "embedded 135M model fails most gates)"),
)

#: what the explanation says for a reason without tested advice
NO_ADVICE = "no tested advice for this reason: the rejected records of this stage say why (agentrag view OUT)"
#: the advice for items left unfinished (an outage): tested too
RERUN = "rerun the same command to finish them"

#: an option a hint names, and the one to name instead on a command without it
FALLBACK_OPTIONS = {"--teacher": "--llm", "--judge": "--llm"}
#: what a hint says for an option the command lacks, when no fallback option exists either
MISSING_OPTION_WORDS = {"--llm": "model", "--teacher": "teacher model", "--judge": "judge model", "--kb": "the KB"}
#: the options that give a synthesizer its input, in the order they are named
INPUT_OPTIONS = ("--dataset", "--seeds", "--kb", "--limit")


def fit_options(hint: str, options: Collection[str] | None) -> str:
    """``hint`` naming only options of the command (``options``; None: any): an option it lacks
    gives way to its fallback (``--teacher`` -> ``--llm``) or to a word."""
    if options is None:
        return hint
    for opt, alt in FALLBACK_OPTIONS.items():
        if opt not in options and alt in options:
            hint = re.sub(re.escape(opt) + r"(?![\w-])", alt, hint)
    for opt, word in MISSING_OPTION_WORDS.items():
        if opt not in options:
            hint = re.sub(re.escape(opt) + r"(?![\w-])", word, hint)
    return hint


_SETTING = re.compile(r"\b([a-z_]{2,})\.[a-z_]{2,}\b")


def hint_for(reason: str, options: Collection[str] | None = None, sections: Collection[str] | None = None,
             keys: Collection[str] | None = None) -> str:
    """The tested advice for a rejection ``reason`` (or :data:`NO_ADVICE`), naming only the
    command's ``options`` and, when the run's config ``sections`` (and top-level ``keys``) are
    given, only its settings: two synthesizers may name a reason alike ("malformed"), and advice
    naming another one's settings (``pairs.min_gap``) is not theirs."""
    hint = REASON_HINTS.get(reason.split(":")[0])
    if hint is not None and _fits(hint, sections, keys):
        return fit_options(hint, options)
    low = reason.lower()
    calls_llm = keys is None or bool({"llm", "teacher", "planner"} & set(keys))  # the annotated teacher has none
    for words, word_hint in WORD_HINTS:
        if calls_llm and any(w in low for w in words):
            return fit_options(word_hint, options)
    return NO_ADVICE


def _fits(hint: str, sections: Collection[str] | None, keys: Collection[str] | None) -> bool:
    if sections is not None and not all(m.group(1) in sections for m in _SETTING.finditer(hint)):
        return False
    bare = re.findall(r"raise ([a-z_]+) or ([a-z_]+)", hint)
    return keys is None or all(k in keys for pair in bare for k in pair)


def explained_stage(funnel: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], bool] | None:
    """``(row, empty)``: the stage that ended the funnel at 0 (``empty``: the first with input and
    no output, when the last stage with any input put out nothing), else the first near-empty
    stage (under :data:`NEAR_EMPTY` of at least :data:`NEAR_EMPTY_MIN_IN` in); None otherwise."""
    fed = [r for r in funnel if int(r.get("in", 0)) > 0]
    if not fed:
        return None
    if int(funnel[-1].get("out", 0)) == 0:
        dry = next((r for r in fed if int(r.get("out", 0)) == 0), None)
        if dry is None:  # every fed stage put out something: the first stage given nothing of it
            dry = next((r for r in funnel[funnel.index(fed[-1]) + 1:] if int(r.get("in", 0)) == 0), fed[-1])
        return dry, True
    low = next((r for r in fed if int(r["in"]) >= NEAR_EMPTY_MIN_IN and int(r.get("out", 0)) < NEAR_EMPTY * int(r["in"])),
               None)
    return (low, False) if low is not None else None


def empty_stage(funnel: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The stage that ended the funnel at 0, or None when the funnel ends with output."""
    got = explained_stage(funnel)
    return got[0] if got is not None and got[1] else None


def explain_empty(funnel: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None = None,
                  options: Collection[str] | None = None) -> list[str]:
    """The explanation of a run whose funnel ended at 0 or has a near-empty stage (none
    otherwise): the stage, its top rejection reasons with counts, and tested advice naming only
    ``options`` (the command's; None: any) and the settings of ``config`` (the run's; None: any)."""
    got = explained_stage(funnel)
    if got is None:
        if funnel and all(int(r.get("in", 0)) == 0 for r in funnel):
            given = [o for o in INPUT_OPTIONS if options is None or o in options]
            check = f" (check {', '.join(given)})" if given else ""
            return [f"nothing was produced: no stage had any input{check}"]
        return []
    row, empty = got
    stage, rejected = str(row.get("stage")), dict(row.get("rejected") or {})
    n_in, n_out = int(row.get("in", 0)), int(row.get("out", 0))
    if empty and n_in == 0:
        f = feeder(funnel, list(funnel).index(row))
        source = f" from '{f['stage']}' ({f['out']} out)" if f is not None else ""
        lines = [f"nothing was produced: stage '{stage}' got no {_unit(row)}{source}; the earlier stages' "
                 "statistics in the report say why."]
    elif empty:
        lines = [f"nothing was produced: stage '{stage}' ended at 0 ({n_in} in, 0 out)."]
    else:
        lines = [f"little was produced: stage '{stage}' kept {n_out} of {n_in} ({100 * n_out / n_in:.0f}%, "
                 f"under {NEAR_EMPTY:.0%})."]
    sections = {k for k, v in config.items() if isinstance(v, Mapping)} if config is not None else None
    keys = set(config) if config is not None else None
    if rejected:
        top = sorted(rejected.items(), key=lambda kv: -kv[1])[:TOP_REASONS]
        lines.append("  top rejections: " + ", ".join(f"{r} ({c} of {n_in})" for r, c in top))
        hints = dict.fromkeys(hint_for(r, options, sections, keys) for r, _ in top)
        lines += [f"  what helps: {h}" for h in hints if h != NO_ADVICE] or [f"  {NO_ADVICE}"]
    elif int(row.get("unfinished", 0)):
        lines.append(f"  {row['unfinished']} items unfinished at this stage: {RERUN}")
    else:
        lines.append(f"  no rejection recorded; {NO_ADVICE}")
    if config is not None and isinstance(config.get(stage), dict):
        lines.append(f"  this stage's settings: {stage}.* (agentrag ... --print-config shows them)")
    return lines


def _names(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\s*\+\s*|,\s*", text) if p.strip()]


def feeder(funnel: Sequence[Mapping[str, Any]], i: int) -> Mapping[str, Any] | None:
    """The stage that feeds row ``i``: of the earlier stages whose declared output row ``i``
    declares as its input, the latest whose ``out`` is row ``i``'s ``in``, else the latest; None
    when it reads no earlier stage's output (the first stage, a side stage)."""
    row = funnel[i]
    reads = set(_names(str(row.get("input", ""))))
    found = [p for p in funnel[:i] if reads & set(_names(str(p.get("output", ""))))]
    same = [p for p in found if int(p.get("out", 0)) in _given(row)]
    pick = same or found
    return pick[-1] if pick else None


def funnel_breaks(funnel: Sequence[Mapping[str, Any]]) -> list[str]:
    """The stages whose ``in`` is not their feeder's ``out`` (:func:`feeder`) although both count
    the same unit; [] when the funnel adds up (a stage counting another unit, sub-questions of
    items, says so in its ``unit``)."""
    out = []
    for i, row in enumerate(funnel):
        f = feeder(funnel, i)
        if f is not None and int(f["out"]) not in _given(row) and _unit(f) == _unit(row):
            out.append(f"{row['stage']}: in {row['in']} (+ {row.get('unfinished', 0)} unfinished) but {f['stage']} "
                       f"put out {f['out']} ({_unit(row)})")
    return out


def _unit(row: Mapping[str, Any]) -> str:
    return str(row.get("unit") or "items")


def _given(row: Mapping[str, Any]) -> tuple[int, int]:
    """What a stage was handed: its ``in``, or (where a stage counts in ``in`` only the items it
    finished, EviPath's) its ``in`` plus the items an outage left unfinished there."""
    return int(row.get("in", 0)), int(row.get("in", 0)) + int(row.get("unfinished", 0))


def in_from(funnel: Sequence[Mapping[str, Any]], i: int) -> str:
    """What row ``i``'s ``in`` is, for the report's funnel: the out of its feeder, or the unit it
    counts of its feeder's output (a fan-out), or its own unit."""
    f = feeder(funnel, i)
    if f is not None and int(f["out"]) in _given(funnel[i]):
        less = int(f["out"]) != int(funnel[i]["in"])
        return f"out of {f['stage']}" + (" (less the unfinished)" if less else "")
    if f is not None:
        return f"{_unit(funnel[i])} of {f['stage']}'s output (counted here)"
    return f"{_unit(funnel[i])} (counted here)"


def explanation_section(metrics: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The report section of :func:`explain_empty` (None when the run produced enough): the lines,
    and the funnel with where each stage's ``in`` comes from."""
    funnel = list(metrics.get("funnel") or [])
    lines = explain_empty(funnel, config)
    if not lines:
        return None
    title = "Why this run produced nothing" if lines[0].startswith("nothing") else "Why this run produced little"
    rows = [[r["stage"], r["in"], r["out"], in_from(funnel, i),
             ", ".join(f"{k}: {v}" for k, v in (r.get("rejected") or {}).items())] for i, r in enumerate(funnel)]
    sentences = [line.strip() for line in lines]
    text = " ".join(p[:1].upper() + p[1:] + ("" if p.endswith(".") else ".") for p in sentences)
    return {"title": title, "text": text,
            "headers": ["stage", "in", "out", "in is", "rejected"], "rows": rows}


__all__ = ["NEAR_EMPTY", "NEAR_EMPTY_MIN_IN", "REASON_HINTS", "WORD_HINTS", "NO_ADVICE", "RERUN", "fit_options",
           "hint_for", "explained_stage", "empty_stage", "explain_empty", "feeder", "funnel_breaks", "in_from",
           "explanation_section"]
