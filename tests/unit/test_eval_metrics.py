"""Metrics: differential test against the official HotpotQA evaluation definitions.

The reference below is written from the published definition of HotpotQA's evaluation script
(normalize_answer / exact_match_score / f1_score), independently of agentrag's code.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter

import pytest

from agentrag.eval.metrics import acc, em, f1, normalize_answer, passage_recall
from agentrag.records import Hit


# ---- reference: HotpotQA's official evaluation (published definition) ----
def ref_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def ref_f1(prediction, ground_truth):
    npred, ngold = ref_normalize(prediction), ref_normalize(ground_truth)
    zero = (0, 0, 0)
    if npred in ["yes", "no", "noanswer"] and npred != ngold:
        return zero
    if ngold in ["yes", "no", "noanswer"] and npred != ngold:
        return zero
    ptoks, gtoks = npred.split(), ngold.split()
    common = Counter(ptoks) & Counter(gtoks)
    num_same = sum(common.values())
    if num_same == 0:
        return zero
    precision = 1.0 * num_same / len(ptoks)
    recall = 1.0 * num_same / len(gtoks)
    return (2 * precision * recall) / (precision + recall), precision, recall


def ref_em(prediction, ground_truth):
    return ref_normalize(prediction) == ref_normalize(ground_truth)


# ---- deterministic prediction/gold pairs from the shared HotpotQA answers ----
def _perturb(ans: str, other: str, rng: random.Random) -> list[str]:
    toks = ans.split()
    out = [ans, ans.upper(), ans.lower(), f"The {ans}", f"a {ans}.", f"an {ans}!", f"  {ans}  ",
           f"{ans}, probably", f'"{ans}"', ans.replace(" ", "  "), other, f"{ans} {other}",
           f"The answer is {ans}", ans + "'s"]
    if len(toks) > 1:
        out.append(" ".join(toks[:-1]))
        out.append(" ".join(reversed(toks)))
    return [rng.choice(out) for _ in range(3)] + [out[0]]


SPECIAL = [("yes", "yes"), ("Yes.", "yes"), ("no", "yes"), ("yes", "no"), ("no", "No!"), ("noanswer", "no answer"),
           ("no answer", "noanswer"), ("noanswer", "noanswer"), ("yes it is", "yes"), ("yes", "yes it is"),
           ("The yes", "yes"), ("no, never", "no"), ("No", "no way"), ("1,000", "1000"), ("1000", "1000"),
           ("1,000 people", "1,000"), ("3.5", "35"), ("3.5 million", "3.5"), ("1990", "1990s"),
           ("two", "2"), ("the the the", "the"), ("An Apple a day", "apple day"), ("", "something"),
           ("Élan vital", "élan vital"), ("rock-and-roll", "rock and roll"), ("U.S.A.", "USA")]


@pytest.fixture(scope="module")
def pairs(data_dir) -> list[tuple[str, str]]:
    answers = []
    for name in ("dev_distractor_200.jsonl", "train_distractor_100.jsonl"):
        with open(data_dir / "hotpotqa" / name, encoding="utf-8") as fh:
            answers += [json.loads(line)["answer"] for line in fh if line.strip()]
    rng = random.Random(13)
    out = list(SPECIAL)
    for i, a in enumerate(answers):
        other = answers[(i * 7 + 3) % len(answers)]
        out += [(p, a) for p in _perturb(a, other, rng)]
    return out


def test_enough_and_varied_pairs(pairs):
    assert len(pairs) >= 200
    golds = {ref_normalize(g) for _, g in pairs}
    assert {"yes", "no"} <= golds
    assert any(re.search(r"\d", g) for g in golds)
    assert any(re.match(r"(?i)(the|a|an) ", p) for p, _ in pairs)
    assert any(any(c in string.punctuation for c in p) for p, _ in pairs)


def test_em_f1_agree_exactly_with_official_definitions(pairs):
    mismatches = []
    for pred, gold in pairs:
        if normalize_answer(pred) != ref_normalize(pred):
            mismatches.append(("normalize", pred))
        if em(pred, [gold]) != float(ref_em(pred, gold)):
            mismatches.append(("em", pred, gold))
        if f1(pred, [gold]) != ref_f1(pred, gold)[0]:
            mismatches.append(("f1", pred, gold, f1(pred, [gold]), ref_f1(pred, gold)[0]))
    assert not mismatches, mismatches[:10]
    # the pairs exercise all regimes: exact, partial and zero
    f1s = [f1(p, [g]) for p, g in pairs]
    assert any(v == 1.0 for v in f1s) and any(v == 0.0 for v in f1s) and any(0 < v < 1 for v in f1s)


def test_max_over_golds_matches_reference(pairs):
    for i in range(0, len(pairs) - 2, 3):
        pred = pairs[i][0]
        golds = [pairs[i][1], pairs[i + 1][1], pairs[i + 2][1]]
        assert em(pred, golds) == float(max(ref_em(pred, g) for g in golds))
        assert f1(pred, golds) == max(ref_f1(pred, g)[0] for g in golds)


def test_special_cases():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert f1("yes", ["yes indeed"]) == 0.0
    assert f1("no", ["No."]) == 1.0
    assert em(None, ["x"]) == 0.0 and f1(None, ["x"]) == 0.0 and acc(None, ["x"]) == 0.0
    assert f1("Barack Obama", ["Obama"]) == pytest.approx(2 / 3)
    assert em("obama", "Obama") == 1.0  # a bare string gold is one gold


def test_acc_is_token_aligned_containment():
    assert acc("It was Barack Obama, in 2009.", ["barack obama"]) == 1.0
    assert acc("Obamacare", ["obama"]) == 0.0
    assert acc("no idea", ["yes", "idea"]) == 1.0
    assert acc("anything", [""]) == 0.0


def test_passage_recall_by_id_then_title():
    hits = [Hit(id="p1", title="Rush", text="x", score=1), Hit(id="p9", title="Neil Peart", text="y", score=1)]
    assert passage_recall(hits, ["p1", "p2"]) == 0.5
    assert passage_recall(hits, [], ["neil peart", "Rush", "Toto"]) == pytest.approx(2 / 3)
    assert passage_recall(hits) is None
    assert passage_recall([], ["p1"]) == 0.0
