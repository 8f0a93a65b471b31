from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from agentrag.errors import UserError
from agentrag.render import Section, bar_chart_svg, write_report
from agentrag.report import write_eval_report


def test_write_report_md_and_html(tmp_path):
    md, html = write_report(tmp_path / "run", "My <run>", [
        Section(title="Numbers", text="a & b", headers=["metric", "value"], rows=[["EM", 0.12345], ["n", None]]),
        {"title": "Chart", "svg": bar_chart_svg({"1": 3, "2": 5}), "caption": "steps"},
    ])
    assert md.name == "report.md" and html.name == "report.html"
    m = md.read_text()
    assert m.startswith("# My <run>") and "| EM | 0.123 |" in m and "| n | – |" in m and "<svg" in m
    h = html.read_text()
    assert "<title>My &lt;run&gt;</title>" in h and "a &amp; b" in h and "<td>0.123</td>" in h
    assert "<figcaption>steps</figcaption>" in h


def test_bar_chart_is_valid_svg_with_one_bar_per_label():
    svg = bar_chart_svg({"0": 1, "1": 4, "10": 2}, x_label="steps")
    root = ET.fromstring(svg)
    rects = root.findall("{http://www.w3.org/2000/svg}rect")
    assert len(rects) == 3
    heights = [float(r.get("height")) for r in rects]
    assert heights[1] == max(heights) and heights[0] == pytest.approx(heights[1] / 4)
    ET.fromstring(bar_chart_svg({}))  # empty data still renders


def test_bad_sections(tmp_path):
    with pytest.raises(UserError, match="every row needs 2 cells"):
        write_report(tmp_path, "t", [Section(title="x", headers=["a", "b"], rows=[[1]])])
    with pytest.raises(UserError, match="section 0"):
        write_report(tmp_path, "t", [42])


def test_eval_report_has_metric_hop_and_histogram(tmp_path):
    metrics = {"n": 4, "em": 0.25, "f1": 0.5, "acc": 0.5, "judge_pass": None, "recall": 0.75, "mean_steps": 2.0,
               "finish_reasons": {"answered": 3, "max_steps": 1},
               "hops": {"steps_c": 2.0, "steps_i": 3.0, "collapse_rate": 0.25, "over_extension_rate": 0.5,
                        "maxd": None, "step_histogram": {"1": 1, "2": 2, "4": 1},
                        "by_hops": {"2": {"n": 4, "accuracy": 0.25, "em": 0.25, "f1": 0.5, "mean_steps": 2.0,
                                          "steps_c": 2.0, "steps_i": 3.0, "collapse_rate": 0.25,
                                          "over_extension_rate": 0.5, "maxd": None}}}}
    md, html = write_eval_report(tmp_path, metrics, title="Eval")
    text = md.read_text()
    assert "| EM | 0.250 |" in text and "| max_steps | 1 |" in text
    assert "| 2 | 4 | 0.250 | 0.250 | 0.500 | 2.000 | 2.000 | 3.000 | 0.250 | 0.500 | – |" in text
    assert html.read_text().count("<rect") == 3
