"""report.write_report on small hand-made rows: escaping of untrusted text, no external resources, sections present;
then the page opened for real in headless Chromium (rendered DOM after JS, console messages, a screenshot)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import model_entry, run_dir
from factories import response
from fakeserver import FakeOpenAIServer

from rubricrun.results.report import FAILURE_CAP, by_example, render_report, sample, write_report
from rubricrun.types import Criterion, Example, Judgment, Response, Usage

EVIL = 'Sure! <script>alert(1)</script> and a stray </script> then <img src=x onerror="alert(2)"> & <!-- done'
PROMPT = "Explain compound interest to a ten-year-old (prompt-marker-7f3a)."
RUBRIC = (
    Criterion(id="c1", text="Uses a simple example with numbers.", weight=5.0, category="Clarity"),
    Criterion(id="c2", text="Says interest earns interest <b>over time</b>.", weight=3.0, category="Accuracy"),
    Criterion(id="c3", text="Uses jargon without explaining it.", weight=-2.0, category="Clarity", tags=("style",)),
)


def _resp(eid: str, cand: str, text: str | None, status: str = "ok", error: str | None = None) -> Response:
    return response(eid, cand, text, status=status, error=error, usage=Usage(10, 20, 30))


def _judg(
    r: Response, crit: Criterion, verdict: str, expl: str | None, error: str | None = None, **kw: Any
) -> Judgment:
    return Judgment(
        id=f"{r.id}#{crit.id}",
        response_id=r.id,
        example_id=r.example_id,
        candidate=r.candidate,
        criterion_id=crit.id,
        weight=crit.weight,
        judge=kw.pop("judge", "judge-a"),
        verdict=verdict,  # type: ignore[arg-type]
        explanation=expl,
        error=error,
        key=f"jk-{r.id}-{crit.id}",
        **kw,
    )


def _run() -> tuple[dict[str, Any], list[Example], list[Response], list[Judgment]]:
    e1 = Example(
        id="ds/e1",
        dataset="ds",
        source="ds.jsonl:1",
        messages=({"role": "system", "content": "Be kind."}, {"role": "user", "content": PROMPT}),
        rubric=RUBRIC,
    )
    e2 = Example(
        id="ds/e2",
        dataset="ds",
        source="ds.jsonl:2",
        messages=({"role": "user", "content": "Which is a prime? A) 4 B) 7"},),
        choices=("4", "7"),
        answer="B",
    )
    a1, b1 = _resp("ds/e1", "alpha", EVIL), _resp("ds/e1", "beta", "If you save $100 at 10%, next year you have $110.")
    a2 = _resp("ds/e2", "alpha", "B")
    b2 = _resp("ds/e2", "beta", None, status="error", error="HTTP 500 <b>upstream</b> failed")
    votes = ({"judge": "judge-a", "verdict": "met"}, {"judge": "judge-b", "verdict": "not_met"})
    judgments = [
        _judg(a1, RUBRIC[0], "not_met", "No numbers </script><script>alert(3)</script>"),
        _judg(a1, RUBRIC[1], "error", None, error="judge said <nonsense>", judge="judge-a+judge-b", votes=votes),
        _judg(a1, RUBRIC[2], "met", "Says 'APR' unexplained."),
        _judg(b1, RUBRIC[0], "met", "Uses $100 at 10%."),
        _judg(b1, RUBRIC[1], "met", "Implied."),
        _judg(b1, RUBRIC[2], "not_met", "Plain words."),
        Judgment(
            id=f"{a2.id}#correct",
            response_id=a2.id,
            example_id="ds/e2",
            candidate="alpha",
            criterion_id="correct",
            weight=1.0,
            judge="auto:choice",
            verdict="met",
            explanation="extracted B, expected B",
            error=None,
        ),
    ]

    def cand(score: float, lo: float, hi: float) -> dict[str, Any]:
        return {"score": score, "ci": [lo, hi], "std": 0.1, "n": 2, "coverage": 1.0, "partial": 0, "scored": 2}

    summary: dict[str, Any] = {
        "run_id": "r<1>",
        "status": "complete",
        "pass_threshold": 0.5,
        "examples": 2,
        "datasets": {
            "ds": {
                "metric": "rubric",
                "on_error": "exclude",
                "candidates": {"alpha": cand(0.3, 0.1, 0.55), "beta": cand(0.8, 0.6, 1.0)},
                "leaderboard": [
                    {"rank": 1, "candidate": "beta", "score": 0.8, "ci_low": 0.6, "ci_high": 1.0} | {"n": 2},
                    {"rank": 2, "candidate": "alpha", "score": 0.3, "ci_low": 0.1, "ci_high": 0.55} | {"n": 2},
                ],
            }
        },
        "overall": {"datasets": ["ds"], "candidates": {"alpha": {"score": 0.3, "datasets": 1}} | {"beta": {}}},
        "judges": {
            "per_judge": {"judge-a": {"met_rate": 0.6, "judged": 5, "errors": 0}},
            "agreement": {"criteria_with_votes": 1, "percent_agreement": 0.0, "fleiss_kappa": None},
        },
        "costs": {
            "total_usd": 0.0123,
            "saved_usd": 0.004,
            "by_model": {  # the shape costs.cost_report writes
                "candidate:openai/alpha": {"role": "candidate", "model": "openai/alpha", "calls": 2, "cached": 1}
                | {"prompt_tokens": 20, "completion_tokens": 40, "cached_prompt_tokens": 10}
                | {"cached_completion_tokens": 20, "usd": 0.01, "saved_usd": 0.004},
                "judge:local/j": {"role": "judge", "model": "local/j", "calls": 5, "usd": None, "saved_usd": None},
            },
            "unpriced": ["local/j"],
        },
        "budget": {"budget_usd": 0.01, "spent_usd": 0.0123, "stopped": True},
    }
    return summary, [e1, e2], [a1, b1, a2, b2], judgments


class _Tags(HTMLParser):
    """Every real tag and its attributes (script bodies are raw text to the parser, as to a browser)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _data_block(page: str) -> dict[str, Any]:
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert m, "no data block"
    return json.loads(m.group(1))


def test_report_escapes_untrusted_text_and_has_no_external_resources(tmp_path: Path) -> None:
    summary, examples, responses, judgments = _run()
    path = write_report(tmp_path, summary, sample(by_example(examples, responses, judgments)))
    assert path == tmp_path / "report.html"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temp file left behind
    page = path.read_text(encoding="utf-8")

    # Untrusted text never appears as markup: exactly our two script elements, no injected tags.
    assert "<script>alert" not in page and "alert(1)</script>" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<img" not in page and "<b>upstream" not in page and "<nonsense>" not in page and "<!-- done" not in page
    assert "HTTP 500 &lt;b&gt;upstream&lt;/b&gt; failed" in page  # server-rendered failure row, escaped
    assert "judge said &lt;nonsense&gt;" in page
    assert "r&lt;1&gt;" in page and "<1>" not in page  # the run id too
    tags = _Tags()
    tags.feed(page)
    assert [t for t, _ in tags.tags].count("script") == 2
    assert not [t for t, _ in tags.tags if t in ("img", "iframe", "link", "object", "embed")]

    # Offline: no URL scheme anywhere, every href is an in-page anchor, nothing loaded by src.
    assert not re.search(r"(?i)https?:|//[a-z0-9-]+\.[a-z]", page)
    assert "url(" not in page and "@import" not in page
    for _, attrs in tags.tags:
        assert "src" not in attrs and "srcset" not in attrs
        assert (attrs.get("href") or "#").startswith("#")

    # The embedded data round-trips: the untrusted text is intact as data, the prompt stored once.
    data = _data_block(page)
    assert data["cands"] == ["alpha", "beta"]
    e1 = data["ex"][0]
    assert e1["r"][0][3] == EVIL
    assert page.count("prompt-marker-7f3a") == 1
    assert [k[0] for k in e1["k"]] == ["c1", "c2", "c3"]
    assert data["ex"][1]["k"][0][:2] == ["correct", "The response gives the correct final answer."]
    # Scores per response from the verdicts: alpha met only the penalty (-2 of span 10), beta met both positives.
    assert e1["r"][0][5] == 0.0 and e1["r"][1][5] == 1.0

    # Sections.
    for sid in ("datasets", "pairwise", "judges", "costs", "failures", "examples"):
        assert f'<section id="{sid}">' in page
    # Only the per-dataset results: no pooled leaderboard, pairwise table or met-rate heat map (issue 21).
    assert '<section id="leaderboard">' not in page and '<section id="categories">' not in page
    board = page[page.index('<section id="datasets">') : page.index('<section id="pairwise">')]
    assert board.index("<b>beta</b>") < board.index("<b>alpha</b>")
    assert board.count("<circle") == 2 and "separated from all others" in board
    facts = page[page.index("<dl class=facts>") : page.index("</dl>")]
    assert "<dt>candidates</dt><dd>2</dd>" in facts and "<dt>responses</dt><dd>4</dd>" in facts
    assert "<dt>response errors</dt><dd>1</dd>" in facts and "<dt>metric</dt>" not in facts
    assert "$0.0123" in page and "Budget: $0.0100; spent $0.0123" in page and "the run stopped at the budget" in page
    assert "percent agreement" in page and "Response errors (1)" in page and "Judgment errors (1)" in page
    assert 'href="#ex=ds%2Fe2"' in page


def test_report_accepts_a_bare_summary(tmp_path: Path) -> None:
    summary, examples, responses, judgments = _run()
    unpriced = {**summary, "budget": {"budget_usd": None, "spent_usd": 0.0, "stopped": False}}
    page = render_report(unpriced, sample(by_example(examples, responses, judgments)))
    assert "Budget: none set; spent $0.0000; stopped: no" in page
    assert "<td>unpriced</td>" in page and "No known price (counted as $0): local/j" in page

    bare = {k: v for k, v in summary.items() if k not in ("costs", "budget", "status")}
    page = render_report(bare, sample(by_example(examples, responses, judgments)))
    assert "Total <b>" not in page and "Budget" not in page and "No usage recorded." in page
    empty = write_report(tmp_path, {"run_id": "empty"}, sample([])).read_text(encoding="utf-8")
    assert "No per-dataset results in this summary." in empty and _data_block(empty)["ex"] == []


def test_failures_are_capped(tmp_path: Path) -> None:
    summary, examples, _, _ = _run()
    n = FAILURE_CAP + 7
    bad = [_resp("ds/e1", f"c{i}", None, status="error", error=f"boom {i}") for i in range(n)]
    page = render_report(summary, sample(by_example(examples, bad, [])))
    assert f"Response errors ({n})" in page and "… and 7 more in responses.jsonl" in page
    assert "boom 99" in page and f"boom {n - 1}</code>" not in page


# ---------------------------------------------------------------------------------------------------------------
# In a real browser

CHROMIUM = shutil.which("chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


def _chromium(tmp_path: Path, url: str, *args: str) -> tuple[str, list[str]]:
    """stdout, and the page's console lines (Chromium logs every console message and uncaught error as CONSOLE)."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    cmd = [CHROMIUM or "chromium", *FLAGS, f"--user-data-dir={profile}", *args, url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    return proc.stdout, console


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary on PATH (apt-get install chromium)")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    # The console scan must be able to see errors at all: a page that logs and throws is caught.
    canary = tmp_path / "canary.html"
    canary.write_text("<p>x</p><script>console.error('canary-log'); null.f();</script>", encoding="utf-8")
    _, console = _chromium(tmp_path, canary.as_uri(), "--dump-dom")
    assert any("canary-log" in ln for ln in console) and any("Uncaught" in ln for ln in console)

    summary, examples, responses, judgments = _run()
    path = write_report(tmp_path / "run", summary, sample(by_example(examples, responses, judgments)))
    dom, console = _chromium(tmp_path, path.as_uri(), "--dump-dom")
    assert console == []
    # The JS ran: the first example card is rendered and open, with its criteria and verdicts.
    assert "page 1 / 1 · 2 of 2 examples" in dom
    assert dom.count('<details class="ex"') == 2 and '<details class="ex" open=""' in dom
    assert "Uses a simple example with numbers." in dom and "Says interest earns interest &lt;b&gt;over time" in dom
    assert '<span class="v v-n">not met</span>' in dom and '<span class="v v-e">error</span>' in dom
    assert "judge judge-a: met, judge-b: not met" in dom
    # Model output is shown as text, never turned into elements.
    assert "Sure! &lt;script&gt;alert(1)&lt;/script&gt; and a stray &lt;/script&gt;" in dom
    assert "<img" not in dom and "<script>alert" not in dom
    assert "<b>beta</b>" in dom and "<b>alpha</b>" in dom

    # A failure link (#ex=...) filters the list down to that example.
    dom, console = _chromium(tmp_path, path.as_uri() + "#ex=ds%2Fe2", "--dump-dom")
    assert console == [] and "page 1 / 1 · 1 of 2 examples" in dom and "HTTP 500 &lt;b&gt;upstream" in dom

    shot = tmp_path / "report.png"
    _, console = _chromium(tmp_path, path.as_uri(), f"--screenshot={shot}", "--window-size=1280,3000")
    assert console == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    shutil.copyfile(shot, "/tmp/report_screenshot.png")


CONTENT_PARTS = (
    {"type": "text", "text": "What is in this picture? <b>not bold</b>"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    {"type": "image_url", "image_url": "https://images.example/cat.png"},
    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
)


def test_content_parts_are_embedded_as_parts() -> None:
    summary, examples, responses, judgments = _run()
    multi = Example(
        id="ds/e3", dataset="ds", source="ds.jsonl:3", messages=({"role": "user", "content": list(CONTENT_PARTS)},)
    )
    page = render_report(summary, sample(by_example([*examples, multi], responses, judgments)))
    parts = _data_block(page)["ex"][2]["m"][0][1]
    assert parts[:3] == [
        ["t", "What is in this picture? <b>not bold</b>"],
        ["i", "data:image/png;base64,iVBORw0KGgo="],
        ["i", "https://images.example/cat.png"],
    ]
    assert parts[3][0] == "x" and json.loads(parts[3][1])["type"] == "input_audio"


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary on PATH (apt-get install chromium)")
def test_content_parts_and_penalty_hits_render_in_chromium(tmp_path: Path) -> None:
    summary, examples, responses, judgments = _run()
    parts = ({"role": "user", "content": list(CONTENT_PARTS)},)
    examples = [msgspec.structs.replace(examples[0], messages=parts), examples[1]]
    path = write_report(tmp_path / "run", summary, sample(by_example(examples, responses, judgments)))
    dom, console = _chromium(tmp_path, path.as_uri(), "--dump-dom")
    assert console == []
    assert "What is in this picture? &lt;b&gt;not bold&lt;/b&gt;" in dom  # text part as text
    assert '<img class="thumb" src="data:image/png;base64,iVBORw0KGgo=" alt="image">' in dom  # data: URL, thumbnail
    assert '<a href="https://images.example/cat.png" rel="noopener noreferrer" target="_blank">' in dom  # http: link
    # alpha met c3 (weight -2): a penalty hit in its own colour, not a green "met".
    assert '<span class="v v-p">penalty hit</span>' in dom


# Appended to a copy of the page: after the page's own script has rendered the examples, it sends the layout (the
# page's width against its frame's, and the tables that scroll inside themselves) to the frame's parent.
FIT_PROBE = (
    "<script>(function(){var d=document.documentElement,w=[].slice.call(document.querySelectorAll('table,.scroll'))"
    ".filter(function(x){return x.scrollWidth>x.clientWidth+1}).map(function(x){return x.className||x.tagName});"
    "parent.postMessage(JSON.stringify({cw:d.clientWidth,sw:d.scrollWidth,inner:w}),'*');})();"
    "</script>"
)


FRAME = (
    '<body style="margin:0"><iframe src="{src}" style="border:0;width:{width}px;height:1500px"></iframe>'
    "<script>addEventListener('message',function(e){{document.body.setAttribute('data-fit',e.data)}})</script>"
)
BIG_WINDOW = ("--window-size=1300,1500", "--virtual-time-budget=5000")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary on PATH (apt-get install chromium)")
def test_report_fits_a_laptop_and_a_phone(tmp_path: Path, make_config, cli_main) -> None:
    """Issue 23: at 1,400 px the PRBench table overflowed to the right. A run over every sample dataset (PRBench's
    table is the widest) with three candidates: no horizontal page scroll at 1,280 px (and no results table that
    scrolls inside itself there) nor at 390 px, where a wide table may scroll inside itself."""
    with FakeOpenAIServer() as server:
        cands = [model_entry(n, f"openai/cand-{n}", server) for n in ("alpha", "beta", "gamma-with-a-long-name")]
        cfg = make_config(server, candidates=cands, judges=[model_entry("j1", "openai/judge-one", server)])
        rc, _, err = cli_main(["--config", str(cfg), "--run-id", "fit"])
        assert rc == 0, err
    page = run_dir(tmp_path, "fit") / "report.html"
    text = " ".join(page.read_text(encoding="utf-8").split())
    # The fake server answers every candidate alike: the page says so rather than leave three equal rows unexplained.
    assert "Every candidate has the same prbench score: on these 3 examples the judge cannot tell them apart" in text
    assert "Every candidate has the same accuracy on these 4 examples: no candidate is ahead here." in text
    assert 'class="allcols"' in text and '<th class="sec">std</th>' in text  # secondary columns collapse
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", FIT_PROBE + "</body>"), encoding="utf-8")
    for width in (1280, 390):
        # Headless Chromium keeps a window at least 500 px wide: the page goes in a frame of the width asked for,
        # which posts the probe's result up to the window's DOM.
        frame = tmp_path / f"frame-{width}.html"
        frame.write_text(FRAME.format(width=width, src=probe.name), encoding="utf-8")
        shutil.copyfile(frame, probe.parent / frame.name)
        dom, console = _chromium(tmp_path, (probe.parent / frame.name).as_uri(), "--dump-dom", *BIG_WINDOW)
        assert console == []
        fit = json.loads(html.unescape(re.search(r'data-fit="([^"]*)"', dom).group(1)))  # type: ignore[union-attr]
        assert fit["cw"] <= width and fit["sw"] <= fit["cw"], (width, fit)
        if width == 1280:
            assert not [t for t in fit["inner"] if "board" in t or t == "scroll"], fit
        shot = tmp_path / f"fit-{width}.png"
        _chromium(tmp_path, (probe.parent / frame.name).as_uri(), f"--screenshot={shot}", *BIG_WINDOW)
        shutil.copyfile(shot, f"/tmp/rubricrun-report-{width}.png")
