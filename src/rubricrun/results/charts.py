"""Pictures for report.html as inline SVG (self-contained, no JavaScript): a radar of per-category scores (MT-Bench's
familiar picture) and a histogram of per-example scores. Each returns `Markup` the template inserts as is: every
label inside is escaped here."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from markupsafe import Markup, escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777")


def _f(x: float) -> str:
    return f"{x:.1f}"


LABEL_CHARS = 18  # what fits in the radar's side padding at 11 px (about 6 px a character: 110 px)
TITLE_CHARS = 300  # a tooltip's text at most: names come from the rows, and a row can be megabytes


def _title(text: str) -> str:
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"


def radar_svg(
    categories: Sequence[str], series: Mapping[str, Mapping[str, float | None]], *, size: int = 320
) -> Markup:
    """One polygon per series (candidate) over `categories` (at least 3), values in [0, 1]; a missing value
    is drawn at 0 and marked with a hollow point. Empty Markup when there are fewer than 3 categories."""
    if len(categories) < 3:
        return Markup("")
    pad = 110  # room on each side for the category labels, which are drawn outside the circle
    width = size + 2 * pad
    cx, cy = width / 2, size / 2
    radius = size / 2 - 40
    n = len(categories)

    def point(i: int, r: float) -> tuple[float, float]:
        angle = -math.pi / 2 + 2 * math.pi * i / n
        return cx + r * math.cos(angle), cy + r * math.sin(angle)

    parts = [f'<svg class="radar" viewBox="0 0 {width} {size}" width="{width}" height="{size}" role="img">']
    for level in (0.25, 0.5, 0.75, 1.0):
        ring = " ".join(f"{_f(x)},{_f(y)}" for x, y in (point(i, radius * level) for i in range(n)))
        parts.append(f'<polygon points="{ring}" fill="none" stroke="#d1d5db" stroke-width="1"/>')
    for i, cat in enumerate(categories):
        x, y = point(i, radius)
        lx, ly = point(i, radius + 16)
        anchor = "middle" if abs(lx - cx) < 1 else ("start" if lx > cx else "end")
        parts.append(f'<line x1="{_f(cx)}" y1="{_f(cy)}" x2="{_f(x)}" y2="{_f(y)}" stroke="#e5e7eb"/>')
        short = cat if len(cat) <= LABEL_CHARS else cat[: LABEL_CHARS - 1] + "…"  # the whole name in its <title>
        parts.append(
            f'<text x="{_f(lx)}" y="{_f(ly)}" text-anchor="{anchor}" font-size="11">{escape(short)}'
            f"<title>{escape(_title(cat))}</title></text>"
        )
    for k, (name, values) in enumerate(series.items()):
        color = PALETTE[k % len(PALETTE)]
        pts = [point(i, radius * min(1.0, max(0.0, values.get(c) or 0.0))) for i, c in enumerate(categories)]
        poly = " ".join(f"{_f(x)},{_f(y)}" for x, y in pts)
        parts.append(
            f'<polygon points="{poly}" fill="{color}" fill-opacity="0.12" stroke="{color}" stroke-width="2">'
            f"<title>{escape(_title(name))}</title></polygon>"
        )
        for (x, y), c in zip(pts, categories, strict=True):
            v = values.get(c)
            fill = color if v is not None else "white"
            label = f"{name} · {c}: {'n/a' if v is None else f'{v:.3f}'}"
            parts.append(
                f'<circle cx="{_f(x)}" cy="{_f(y)}" r="3" fill="{fill}" stroke="{color}">'
                f"<title>{escape(_title(label))}</title></circle>"
            )
    parts.append("</svg>")
    return Markup("".join(parts) + overlap_note(categories, series))


def overlap_note(categories: Sequence[str], series: Mapping[str, Mapping[str, float | None]]) -> str:
    """A line naming the series drawn exactly over an earlier one (same value on every axis, to 3 decimals): the
    later polygon hides the earlier, so without the line a reader would think a candidate is missing."""
    seen: dict[tuple[float | None, ...], list[str]] = {}
    for name, values in series.items():
        key = tuple(None if values.get(c) is None else round(float(values[c] or 0.0), 3) for c in categories)
        seen.setdefault(key, []).append(name)
    same = [names for names in seen.values() if len(names) > 1]
    if not same:
        return ""
    groups = "; ".join(", ".join(str(escape(_title(n))) for n in names) for names in same)
    return f'<p class="note overlap">Same score on every axis, drawn on top of each other: {groups}.</p>'


def histogram_bins(values: Sequence[float], lo: float = 0.0, hi: float = 1.0, bins: int = 10) -> list[int]:
    """Counts of `values` in `bins` equal-width bins over [lo, hi]; the last bin is closed (hi counts in it);
    values outside [lo, hi] go to the first or last bin (a HealthBench or PRBench example can score below 0)."""
    width = (hi - lo) / bins
    at = (np.asarray(values, dtype=np.float64) - lo) // width if width > 0 else np.zeros(len(values))
    return np.bincount(np.clip(at, 0, bins - 1).astype(np.intp), minlength=bins).tolist()


def histogram_svg(
    counts: Sequence[int], *, lo: float = 0.0, hi: float = 1.0, width: int = 240, height: int = 90
) -> Markup:
    """A small bar chart of per-example scores binned by `histogram_bins`; each bar's tooltip gives its range
    and count. Empty Markup when there are no bins."""
    if not counts:
        return Markup("")
    bins = len(counts)
    top = max(counts) or 1
    bar_w = width / bins
    plot_h = height - 16
    parts = [f'<svg class="hist" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    for i, c in enumerate(counts):
        h = plot_h * c / top
        a, b = lo + i * (hi - lo) / bins, lo + (i + 1) * (hi - lo) / bins
        parts.append(
            f'<rect x="{_f(i * bar_w + 1)}" y="{_f(plot_h - h)}" width="{_f(bar_w - 2)}" height="{_f(h)}" '
            f'fill="#2563eb"><title>{a:.2f}–{b:.2f}: {c}</title></rect>'
        )
    parts.append(f'<line x1="0" y1="{plot_h}" x2="{width}" y2="{plot_h}" stroke="#9ca3af"/>')
    parts.append(f'<text x="0" y="{height - 2}" font-size="10">{lo:g}</text>')
    parts.append(f'<text x="{width}" y="{height - 2}" font-size="10" text-anchor="end">{hi:g}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def dataset_radar(candidates: Mapping[str, object]) -> Markup:
    """The radar for one dataset's candidates (summary DatasetCandidate rows): by the rows' own categories
    (MT-Bench's writing, math, ...) when there are at least 3, else by rubric criterion category."""
    by_row = {n: dict(getattr(c, "by_example_category", {}) or {}) for n, c in candidates.items()}
    cats = sorted({k for v in by_row.values() for k in v})
    if len(cats) >= 3:
        return radar_svg(cats, by_row)
    by_crit: dict[str, dict[str, float | None]] = {}
    for n, c in candidates.items():
        groups = (getattr(c, "extra", {}) or {}).get("by_category") or {}
        by_crit[n] = {k: (g.get("score") if isinstance(g, Mapping) else None) for k, g in groups.items()}
    cats = sorted({k for v in by_crit.values() for k in v})
    return radar_svg(cats, by_crit)
