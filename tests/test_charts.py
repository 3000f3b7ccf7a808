"""results/charts.py: the report's inline SVG pictures."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rubricrun.results.charts import histogram_bins, histogram_svg, radar_svg

SVG = "{http://www.w3.org/2000/svg}"


def test_histogram_bins_by_hand() -> None:
    # width 0.1: 0.0 -> bin 0, 0.05 -> 0, 0.15 -> 1, 0.95 -> 9, 1.0 -> 9 (closed last bin), -0.2 -> 0, 1.3 -> 9
    assert histogram_bins([0.0, 0.05, 0.15, 0.95, 1.0, -0.2, 1.3]) == [3, 1, 0, 0, 0, 0, 0, 0, 0, 3]
    assert histogram_bins([1, 5, 10], lo=0, hi=10, bins=2) == [1, 2]


def test_histogram_svg_is_well_formed_with_one_bar_per_bin() -> None:
    root = ET.fromstring(str(histogram_svg(histogram_bins([0.1, 0.12, 0.9], bins=5))))
    bars = root.findall("rect")
    assert len(bars) == 5
    assert [b.find("title").text for b in bars][0] == "0.00–0.20: 2"


def test_radar_escapes_labels_and_draws_one_polygon_per_candidate() -> None:
    cats = ["writing", "math", "<script>alert(1)</script>"]
    svg = str(radar_svg(cats, {"a&b": {"writing": 0.9, "math": 0.5}, "c": {"writing": 0.1, "math": 1.0}}))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    root = ET.fromstring(svg)
    series = [p for p in root.findall("polygon") if p.find("title") is not None]
    assert [p.find("title").text for p in series] == ["a&b", "c"]
    hollow = [c for c in root.findall("circle") if c.get("fill") == "white"]
    assert len(hollow) == 2  # the third category has no value for either candidate


def test_radar_needs_three_categories() -> None:
    assert str(radar_svg(["a", "b"], {"x": {"a": 1.0, "b": 1.0}})) == ""


def test_histogram_svg_without_bins_is_empty() -> None:
    assert str(histogram_svg([])) == ""


def test_radar_says_when_series_overlap() -> None:
    # Issue 23: identical candidates hid each other in the radar with no hint.
    cats = ["a", "b", "c"]
    same = {"a": 1.0, "b": 0.5, "c": 0.25}
    svg = str(radar_svg(cats, {"x<1>": same, "y": dict(same), "z": {"a": 0.0, "b": 0.5, "c": 0.25}}))
    assert "drawn on top of each other: x&lt;1&gt;, y." in svg and "z" not in svg.split("overlap")[1]
    assert "overlap" not in str(radar_svg(cats, {"x": same, "z": {"a": 0.0, "b": 0.5, "c": 0.25}}))


def test_radar_labels_fit_beside_the_circle_and_keep_their_whole_name() -> None:
    """A long category name is cut to what fits in the side padding (the demo's PRBench 'Process Transparency &
    Auditability' ran off the picture); the whole name stays in the label's tooltip."""
    from rubricrun.results.charts import LABEL_CHARS, radar_svg

    long = "Process Transparency & Auditability"
    svg = str(radar_svg([long, "Financial Accuracy", "Supplemental Insight"], {"a": {long: 0.5}}))
    assert f">{long[: LABEL_CHARS - 1]}…<title>{long.replace('&', '&amp;')}</title>" in svg
    assert ">Financial Accuracy<title>" in svg
