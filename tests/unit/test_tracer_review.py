"""Human review (§3.4): sheet, annotators' labels, majority, disagreements, Fleiss' kappa."""

from __future__ import annotations

import csv
import html as _html
import json
import re
from pathlib import Path

import pytest
from tracer_support import PASSAGES, run_world
from typer.testing import CliRunner

from agentrag.cli.main import app
from agentrag.errors import UserError
from agentrag.synth.tracer.review import decide, fleiss_kappa, read_labels


def test_fleiss_kappa_hand_computed() -> None:
    # 5 items, 3 raters, (Retain, Discard): P_bar = (1+1+1/3+1+1/3)/5 = 11/15; p = (0.6, 0.4); Pe = 0.52
    # kappa = (11/15 - 0.52) / 0.48 = 4/9
    assert fleiss_kappa([[3, 0], [0, 3], [2, 1], [3, 0], [1, 2]]) == pytest.approx(4 / 9)
    # Fleiss (1971) / the textbook 10 items x 5 categories x 14 raters example: kappa = 0.210
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert fleiss_kappa(table) == pytest.approx(0.210, abs=0.001)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # all in one category: undefined
    assert fleiss_kappa([[3, 0], [2, 0]]) is None  # unequal raters


def test_decide_majority_and_disagreements() -> None:
    labels = {"a": {"x": "Retain", "y": "Discard", "z": "Retain"},
              "b": {"x": "Retain", "y": "Retain", "z": "Retain"},
              "c": {"x": "Retain", "y": "Discard"}}
    out = decide(labels)
    assert out["decisions"] == {"x": "Retain", "y": "Discard", "z": "Retain"}
    assert [d["id"] for d in out["disagreements"]] == ["y"]
    assert out["items_rated_by_all"] == 2 and out["retained"] == ["x", "z"]


def test_bad_label_names_file_line_field(tmp_path: Path) -> None:
    f = tmp_path / "a.csv"
    f.write_text("id,decision\nx,Retain\ny,maybe\n")
    with pytest.raises(UserError, match=r"a\.csv:3: field 'decision'"):
        read_labels(f)


def test_review_cli_sheet_and_labels(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_world(run)
    r = CliRunner().invoke(app, ["synth", "tracer", "review", "--run", str(run)])
    assert r.exit_code == 0, r.output
    html = (run / "review" / "sheet.html").read_text()
    # one section per item (2-, 3- and 4-hop), one hop row per level, a Retain and a Discard radio each
    assert len(re.findall(r"<section class='item'", html)) == 3
    assert [html.count(f"class='hop' data-level='{lv}'") for lv in (1, 2, 3, 4)] == [3, 3, 2, 1]
    assert len(re.findall(r"<input type='radio' class='decision' name='decision-\d' value='Retain'>", html)) == 3
    assert len(re.findall(r"<input type='radio' class='decision' name='decision-\d' value='Discard'>", html)) == 3
    assert html.count("<textarea class='comment'") == 3 and "id='save'" in html
    for p in PASSAGES[:4]:  # every document in full, escaped, in the page
        assert _html.escape(p.text) in html
    assert html.count("data-check='irreducibility'") == 2 + 3 + 4 - 3  # verdicts of hops 2.. of each item
    rows = list(csv.DictReader((run / "review" / "sheet.csv").open()))
    assert len(rows) == 3 and all(r["decision"] == "" for r in rows)
    assert [r["chain"].count("hop ") for r in rows] == [int(r["hops"]) for r in rows] == [2, 3, 4]
    assert all(PASSAGES[0].text in r["documents"] for r in rows)
    assert PASSAGES[3].text in rows[2]["documents"] and PASSAGES[3].text not in rows[1]["documents"]
    votes = {"a": ["Retain", "Retain", "Discard"], "b": ["Retain", "Discard", "Discard"], "c": ["Retain", "Retain",
                                                                                              "Retain"]}
    files = []
    for name, vs in votes.items():
        path = tmp_path / f"{name}.csv"
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            for row, v in zip(rows, vs, strict=True):
                w.writerow({**row, "decision": v, "comment": f"{name} on {row['hops']} hops" if v == "Discard" else ""})
        files += ["--labels", str(path)]
    r = CliRunner().invoke(app, ["synth", "tracer", "review", "--run", str(run), *files])
    assert r.exit_code == 0, r.output
    dec = json.loads((run / "review" / "decisions.json").read_text())
    assert len(dec["retained"]) == 2 and len(dec["disagreements"]) == 2
    # counts (R, D): [3,0], [2,1], [1,2] -> P_bar = 5/9, p = (2/3, 1/3), Pe = 5/9 -> kappa = 0
    assert dec["fleiss_kappa"] == pytest.approx(0.0)
    assert dec["per_item"][rows[2]["id"]]["comments"] == {"a": "a on 4 hops", "b": "b on 4 hops"}
    assert dec["per_item"][rows[1]["id"]]["votes"] == {"a": "Retain", "b": "Discard", "c": "Retain"}
    assert dec["comments"] == 3
    kept = [json.loads(x)["id"] for x in (run / "benchmark_reviewed.jsonl").read_text().splitlines()]
    assert kept == [rows[0]["id"], rows[1]["id"]]
