"""The viewer (`run.py --view`, src/rubricrun/viewer/), driven for real: two runs made by rubricrun itself against the
fake OpenAI server (two candidates, a second sample, a multi-turn dataset, a panel of two judges, pairwise judging
in both orders, a prompt holding <script>), the viewer's server started on port 0 in a thread, its pages rendered in
headless Chromium (tests/browser.py) and its JSON twin read with urllib; what they show is checked against the
run's own files, read here with plain `json`."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode

import pytest
import yaml
from browser import CHROMEDRIVER, CHROMIUM, Driver, chromium
from conftest import DEFAULT_RUBRIC, FAKE_KEY, REPO, SAMPLE_DATASETS, read_jsonl, write_config, write_jsonl
from factories import KEY_ENV, model_entry
from fakeserver import FakeOpenAIServer, default_reply, is_judge_request, message_text

from rubricrun.viewer.app import _hostname, create_app
from rubricrun.viewer.search import fts_query

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary on PATH (apt-get install chromium)")
needs_driver = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="no chromium / chromedriver on PATH (apt-get install chromium-driver)",
)
EVIL = "<script>document.title='pwned'</script> Is <b>bold</b> & safe? <img src=x onerror=\"document.title='img'\">"
REASONING = "Let me think this through first (thought-marker-51c)."


def _reply(body: dict[str, Any]) -> Any:
    """Candidates: the fake server's echo, alpha with its reasoning apart; judges: the default verdict (turned around
    on half the criteria by models named `*-b`) with the judge's model name in the explanation; pairwise: the answer
    shown first wins (a position bias, on purpose)."""
    if any("[The Start of Assistant A's Answer]" in message_text(m) for m in body.get("messages") or []):
        return "[[A]]"
    if is_judge_request(body):
        verdict = json.loads(default_reply(body))
        if body["model"].endswith("-b") and hashlib.sha256(json.dumps(body["messages"]).encode()).digest()[0] & 1:
            verdict["criteria_met"] = not verdict["criteria_met"]  # run `after`'s judges differ on half
        verdict["explanation"] = f"{body['model']} says: {verdict['explanation']}"
        return json.dumps(verdict)
    if body["model"] == "cand-alpha":
        return {"content": default_reply(body), "reasoning_content": REASONING}
    return default_reply(body)


def _run(cfg: Path, run_id: str) -> None:
    _cli(["--config", str(cfg), "--run-id", run_id])


def _cli(args: list[str]) -> None:
    """rubricrun's command line in this process, which must exit 0."""
    import logging

    from rubricrun.cli import main

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert main(args) == 0
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        root = logging.getLogger("rubricrun")
        for h in list(root.handlers):
            root.removeHandler(h)
            h.close()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two finished runs: `before` (judges j1 + j2 as a panel) and `after` (the same judges on other models, which
    turn half their verdicts around, so verdicts flip)."""
    tmp = tmp_path_factory.mktemp("viewer-runs")
    evil = write_jsonl(
        tmp / "evil.jsonl", [{"id": "e1", "prompt": EVIL, "rubric": [{"id": "safe", "text": "Safe <b>."}]}]
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, FAKE_KEY)
        mp.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        mp.setenv("NO_PROXY", "127.0.0.1,localhost")
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            mp.delenv(var, raising=False)
        srv = FakeOpenAIServer(responder=_reply).start()
        try:
            for run_id, suffix in (("before", ""), ("after", "-b")):
                cfg = write_config(
                    tmp,
                    srv,
                    filename=f"{run_id}.yaml",
                    candidates=[
                        model_entry("alpha", "openai/cand-alpha", srv),
                        {**model_entry("beta", "openai/cand-beta", srv), "samples_per_prompt": 2},
                    ],
                    judges=[
                        model_entry("j1", f"openai/judge-one{suffix}", srv),
                        model_entry("j2", f"openai/judge-two{suffix}", srv),
                    ],
                    datasets=[{"path": str(p)} for p in SAMPLE_DATASETS] + [{"path": str(evil)}],
                    judging={
                        "default_rubric": DEFAULT_RUBRIC,
                        "judges_per_criterion": 2,
                        "pairwise": {"all_pairs": True},
                    },
                )
                _run(cfg, run_id)
        finally:
            srv.stop()
    yield tmp / "outputs"


class Viewer:
    """The viewer's real server (Werkzeug, threaded) on 127.0.0.1:0 in a thread."""

    def __init__(self, outputs: Path, cache: Path) -> None:
        from werkzeug.serving import make_server

        self.app = create_app(outputs, cache)
        self.server = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def json(self, path: str) -> Any:
        status, body = self.get(path)
        assert status == 200, body
        return json.loads(body)

    def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method="POST", headers={"Content-Type": "application/json", **(headers or {})}
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def close(self) -> None:
        self.server.shutdown()
        self.app.extensions["rubricrun.viewer"].close()


@pytest.fixture
def viewer(outputs: Path, tmp_path: Path) -> Iterator[Viewer]:
    v = Viewer(outputs, tmp_path / "viewer-cache")
    try:
        yield v
    finally:
        v.close()
        (outputs / "before" / "labels.jsonl").unlink(missing_ok=True)  # labels a test posted


def _rows(outputs: Path, run_id: str, name: str) -> list[dict[str, Any]]:
    return read_jsonl(outputs / run_id / f"{name}.jsonl")


def _dom(tmp: Path, url: str) -> str:
    dom, err = chromium(tmp, url, "--dump-dom")
    assert "<html" in dom, err[-2000:]
    return dom


def _visible_text(dom: str) -> str:
    """The DOM's text as a reader sees it (tags dropped, entities decoded)."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)))


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() + f":{p.stat().st_mtime_ns}"
        for p in folder.rglob("*")
        if p.is_file()
    }


# --------------------------------------------------------------------------------------------------
# Pages in Chromium


@needs_chromium
def test_pages_render_in_chromium(outputs: Path, viewer: Viewer, tmp_path: Path) -> None:
    summary = json.loads((outputs / "before" / "summary.json").read_text())
    home = _visible_text(_dom(tmp_path, viewer.url + "/"))
    assert "before" in home and "after" in home and "complete" in home

    for path in ("/", "/runs/before", "/compare/before/after"):  # nothing from the network: no CDN, no fonts
        status, page = viewer.get(path)
        assert status == 200 and not re.search(r"""(src|href|url)\s*[=(]\s*["']?(https?:)?//""", page), path
        assert "<link" not in page and "<script src" not in page and "@import" not in page
    run = _visible_text(_dom(tmp_path, viewer.url + "/runs/before"))
    for name, d in summary["datasets"].items():
        assert name in run
        for row in d["leaderboard"]:  # the report's figures, from summary.json
            assert f"{row['score']:.3f}" in run, (name, row)

    judgments = [j for j in _rows(outputs, "before", "judgments") if j.get("kind") != "pairwise"]
    alpha_not_met = {j["response_id"] for j in judgments if j["candidate"] == "alpha" and j["verdict"] == "not_met"}
    dom = _dom(
        tmp_path, viewer.url + "/runs/before/examples?" + urlencode({"candidate": "alpha", "verdict": "not_met"})
    )
    listed = re.findall(r'<tr><td class="eid"><a href="[^"]*#([^"]+)"', dom)
    assert {unquote(x) for x in listed} == alpha_not_met
    assert f'<b id="total">{len(alpha_not_met)}</b>' in dom


@needs_chromium
def test_example_page_shows_every_judge_and_both_orders(outputs: Path, viewer: Viewer, tmp_path: Path) -> None:
    judgments = _rows(outputs, "before", "judgments")
    pair = next(j for j in judgments if j.get("kind") == "pairwise")
    eid = pair["example_id"]
    mine = [j for j in judgments if j["example_id"] == eid and j.get("kind") != "pairwise"]
    assert mine and all(len(j["votes"]) == 2 for j in mine)  # a panel: every criterion has two votes
    for path in (quote(eid, safe="/"), quote(eid, safe="")):  # `dataset/id` and `dataset%2Fid`
        dom = _dom(tmp_path, f"{viewer.url}/runs/before/examples/{path}")
        text = _visible_text(dom)
        assert eid in text
        for j in mine:
            for vote in j["votes"]:
                assert vote["explanation"] in text  # e.g. "judge-one says: The response satisfies the criterion."
        assert "judge-one says" in text and "judge-two says" in text
        for r in (r for r in _rows(outputs, "before", "responses") if r["example_id"] == eid):
            assert f'id="{r["id"]}"' in dom  # each response, anchored by its id
        table = dom.split('id="pairwise"', 1)[1]
        assert f"<td>{pair['ab']}</td><td>{pair['ba']}</td>" in table  # the verdict in each order


@needs_chromium
def test_reasoning_turns_and_samples_apart(outputs: Path, viewer: Viewer, tmp_path: Path) -> None:
    responses = _rows(outputs, "before", "responses")
    multi = next(r for r in responses if r.get("turn", 1) > 1)
    dom = _dom(tmp_path, f"{viewer.url}/runs/before/examples/{quote(multi['example_id'], safe='/')}")
    assert f"turn {multi['turn']}" in dom and "beta · sample 1" in _visible_text(dom)
    reasoning = dom.split('<details class="reasoning">', 1)[1].split("</details>", 1)[0]
    assert REASONING in reasoning  # alpha's reasoning, folded apart from its answer


@needs_chromium
def test_a_prompt_holding_script_is_shown_as_text(outputs: Path, viewer: Viewer, tmp_path: Path) -> None:
    eid = next(ex["id"] for ex in _rows(outputs, "before", "examples") if ex["id"].startswith("evil/"))
    for url in (f"/runs/before/examples/{quote(eid, safe='/')}", "/runs/before/examples?q=pwned"):
        dom = _dom(tmp_path, viewer.url + url)
        assert "<title>pwned" not in dom and "<title>img" not in dom  # no injected script or handler ran
        assert "document.title='pwned'" in _visible_text(dom)  # shown as text
        assert dom.count("<script") == 1  # ours alone
        assert '<img src="x"' not in dom and "<b>bold</b>" not in dom


@needs_chromium
def test_screenshots_of_every_page(outputs: Path, viewer: Viewer, tmp_path: Path) -> None:
    """Every page as a user sees it (PNG, not blank). RUBRICRUN_VIEWER_SHOTS=docs/img writes docs/viewer.md's."""
    eid = next(j["example_id"] for j in _rows(outputs, "before", "judgments") if j.get("kind") == "pairwise")
    pages = {
        "viewer-runs": ("/", "1280,520"),
        "viewer-run": ("/runs/before", "1280,1300"),
        "viewer-responses": ("/runs/before/examples?" + urlencode({"judge": "j1", "verdict": "not_met"}), "1280,900"),
        "viewer-example": (f"/runs/before/examples/{quote(eid, safe='/')}", "1280,1500"),
        "viewer-compare": ("/compare/before/after", "1280,1100"),
    }
    out = Path(os.environ.get("RUBRICRUN_VIEWER_SHOTS") or tmp_path / "shots")
    out.mkdir(parents=True, exist_ok=True)
    for name, (path, size) in pages.items():
        shot = out / f"{name}.png"
        chromium(tmp_path, viewer.url + path, f"--screenshot={shot}", f"--window-size={size}")
        assert shot.is_file() and shot.stat().st_size > 10_000, name


# --------------------------------------------------------------------------------------------------
# Labelling


def _a_cell(outputs: Path) -> tuple[str, str, str]:
    j = next(j for j in _rows(outputs, "before", "judgments") if j.get("kind") != "pairwise")
    return j["example_id"], j["response_id"], j["criterion_id"]


@needs_chromium
def test_a_label_posted_is_appended_and_read_back(outputs: Path, viewer: Viewer, tmp_path: Path) -> None:
    eid, rid, cid = _a_cell(outputs)
    before = _snapshot(outputs / "before")
    status, row = viewer.post("/api/runs/before/labels", {"response_id": rid, "criterion_id": cid, "met": False})
    assert status == 201 and row["met"] is False
    status, row = viewer.post(
        "/api/runs/before/labels", {"response_id": rid, "criterion_id": cid, "met": True, "rater": "ann <b>"}
    )
    assert status == 201
    lines = read_jsonl(outputs / "before" / "labels.jsonl")
    assert [(r["response_id"], r["criterion_id"], r["met"], r["rater"]) for r in lines] == [
        (rid, cid, False, None),
        (rid, cid, True, "ann <b>"),
    ]
    assert viewer.json("/api/runs/before/labels")["labels"] == lines
    after = _snapshot(outputs / "before")
    assert {k: v for k, v in after.items() if k != "labels.jsonl"} == before  # no file the run wrote was touched
    dom = _dom(tmp_path, f"{viewer.url}/runs/before/examples/{quote(eid, safe='/')}")
    cell = dom.split(f'data-rid="{rid}" data-cid="{cid}"', 1)[1].split("</div>", 1)[0]
    assert "ann &lt;b&gt;: met" in cell and "unnamed: not met" in cell
    listed = _visible_text(_dom(tmp_path, viewer.url + "/runs/before/labels"))
    assert rid in listed and "ann <b>" in listed


def test_bad_labels_are_refused(outputs: Path, viewer: Viewer) -> None:
    _, rid, cid = _a_cell(outputs)
    path = "/api/runs/before/labels"
    assert viewer.post(path, {"response_id": "nope#x#0", "criterion_id": cid, "met": True})[0] == 404
    assert viewer.post(path, {"response_id": rid, "criterion_id": "no-such", "met": True})[0] == 400
    assert viewer.post(path, {"response_id": rid, "criterion_id": cid, "met": "yes"})[0] == 400
    assert viewer.post(path, {"response_id": rid, "criterion_id": cid})[0] == 400
    assert viewer.post(path, {"response_id": rid, "criterion_id": cid, "met": True, "score": 1})[0] == 400
    assert viewer.post(path, b"met=1", {"Content-Type": "application/x-www-form-urlencoded"})[0] == 415
    evil = {"Origin": "http://evil.example"}
    assert viewer.post(path, {"response_id": rid, "criterion_id": cid, "met": True}, evil)[0] == 403
    assert not (outputs / "before" / "labels.jsonl").exists()


def test_concurrent_label_posts_are_whole_lines(outputs: Path, viewer: Viewer) -> None:
    _, rid, cid = _a_cell(outputs)

    def post(i: int) -> None:
        for k in range(15):
            got = viewer.post(
                "/api/runs/before/labels",
                {"response_id": rid, "criterion_id": cid, "met": k % 2 == 0, "rater": f"r{i}"},
            )
            assert got[0] == 201

    threads = [threading.Thread(target=post, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (outputs / "before" / "labels.jsonl").read_text().splitlines()
    assert len(lines) == 120 and all(json.loads(line)["response_id"] == rid for line in lines)


@needs_driver
def test_labelling_by_clicks_and_the_sheet_in_order(outputs: Path, viewer: Viewer, tmp_path: Path) -> None:
    eid, rid, cid = _a_cell(outputs)
    judgments = [j for j in _rows(outputs, "before", "judgments") if j.get("kind") != "pairwise"]
    sheet = [
        {"response_id": j["response_id"], "criterion_id": j["criterion_id"], "dataset": "d", "candidate": j["candidate"],
         "example_id": j["example_id"], "criterion": "Is it <em>kind</em>?", "prompt": "p", "response": "r", "met": None}
        for j in judgments[1:4]
    ]  # fmt: skip
    write_jsonl(outputs / "before" / "label_sheet.jsonl", sheet)
    try:
        with Driver(tmp_path) as d:
            d.get(f"{viewer.url}/runs/before/examples/{quote(eid, safe='/')}")
            d.type("#rater", "bea")
            d.click(f'[data-rid="{rid}"][data-cid="{cid}"] button[data-met="false"]')
            d.wait(lambda: d.text("#label-status") == "saved to labels.jsonl", message="the label saved")
            assert "bea: not met" in d.text(f'[data-rid="{rid}"][data-cid="{cid}"] .humans')
            rows = read_jsonl(outputs / "before" / "labels.jsonl")
            assert [(r["response_id"], r["criterion_id"], r["met"], r["rater"]) for r in rows] == [
                (rid, cid, False, "bea")
            ]

            d.get(f"{viewer.url}/runs/before/sheet")  # the rater is remembered: the sheet is bea's
            d.wait(lambda: "rater=bea" in d.url(), message="the sheet for bea")
            box = "const b = document.querySelector('.label.big'); return b && [b.dataset.rid, b.dataset.cid];"
            for k, want in enumerate(sheet):
                assert d.script(box) == [want["response_id"], want["criterion_id"]]  # in the sheet's order
                assert "Is it <em>kind</em>?" in d.text(".criterion")
                d.click(f'.label.big button[data-met="{"true" if k % 2 else "false"}"]')
                d.wait(lambda k=k: len(read_jsonl(outputs / "before" / "labels.jsonl")) == k + 2, message="a row")
                d.wait(lambda want=want: d.script(box) != [want["response_id"], want["criterion_id"]], message="next")
            d.wait(lambda: "Every row of the sheet is labelled" in (d.text("main, body") or ""), message="the end")
        labelled = read_jsonl(outputs / "before" / "labels.jsonl")[1:]
        assert [(r["response_id"], r["criterion_id"], r["met"]) for r in labelled] == [
            (s["response_id"], s["criterion_id"], k % 2 == 1) for k, s in enumerate(sheet)
        ]
    finally:
        (outputs / "before" / "label_sheet.jsonl").unlink()


# --------------------------------------------------------------------------------------------------
# Labels the run reads: the viewer's labels.jsonl as `datasets[].labels`, the labelling sheet as --label-sheet writes it

SHEET_COLUMNS = [
    "response_id", "criterion_id", "dataset", "candidate", "example_id", "turn", "sample_index", "scale", "criterion",
    "prompt", "response", "met", "score", "rater",
]  # fmt: skip
QUESTION = re.compile(r"Question (\d+)\?")


def _right(model: str, i: int) -> bool:
    """The truth: alpha answers every 4th question right, beta every 2nd (as tests/test_anchor_run.py)."""
    return i % (4 if "alpha" in model else 2) == 0


def _lenient(body: dict[str, Any]) -> str:
    """Candidates answer RIGHT or WRONG; the judge says met to nearly everything (it catches one wrong answer in 16)."""
    text = "\n".join(message_text(m) for m in body["messages"])
    i = int(QUESTION.search(text).group(1))
    if is_judge_request(body):
        return json.dumps({"explanation": "lenient", "criteria_met": "RIGHT" in text or i % 16 != 1})
    return f"Answer {i}: {'RIGHT' if _right(body['model'], i) else 'WRONG'}"


def _small_run(tmp: Path, srv: FakeOpenAIServer, data: Path, run_id: str, judging: dict[str, Any]) -> Path:
    """A finished run `run_id` of candidates alpha and beta judged by j1 on one dataset (named as the run); its
    config's path."""
    cfg = write_config(
        tmp,
        srv,
        candidates=[model_entry("alpha", "openai/cand-alpha", srv), model_entry("beta", "openai/cand-beta", srv)],
        judges=[model_entry("j1", "openai/judge-one", srv)],
        datasets=[{"path": str(data), "name": run_id}],
        judging=judging,
    )
    _run(cfg, run_id)
    return cfg


def _anchored_section(page: str) -> str:
    """The anchored-scores table of a dataset section (report.html's, or the viewer's run page)."""
    start = page.index("<h4>Anchored to human labels</h4>")
    return page[start : page.index("</tbody></table></div>", start)]


def _shot(tmp: Path, url: str, name: str, size: str) -> None:
    """A PNG of the page when Chromium is here (RUBRICRUN_VIEWER_SHOTS=docs/img writes docs/viewer.md's)."""
    if CHROMIUM is None:
        return
    out = Path(os.environ.get("RUBRICRUN_VIEWER_SHOTS") or tmp / "shots")
    out.mkdir(parents=True, exist_ok=True)
    chromium(tmp, url, f"--screenshot={out / f'{name}.png'}", f"--window-size={size}")
    assert (out / f"{name}.png").stat().st_size > 10_000, name


def test_labels_posted_in_the_viewer_anchor_the_run(tmp_path: Path) -> None:
    """The labelling sheet as `--label-sheet` writes it, worked through in the viewer (its order, its columns), the
    labels the viewer appended read by the run (`datasets[].labels: outputs/<run>/labels.jsonl`, no call made), the
    anchored estimates in summary.json, and the viewer's run page showing them as report.html does."""
    data = write_jsonl(tmp_path / "q.jsonl", [{"id": f"q{i}", "prompt": f"Question {i}?"} for i in range(48)])
    rubric = [{"id": "correct", "text": "The response is right.", "weight": 1}]
    with FakeOpenAIServer(responder=_lenient) as srv:
        cfg = _small_run(tmp_path, srv, data, "r", {"default_rubric": rubric})
        run = tmp_path / "outputs" / "r"
        _cli(["--label-sheet", str(run), "--sheet-size", "12"])
        sheet = read_jsonl(run / "label_sheet.jsonl")
        assert len(sheet) == 24 and all(list(row) == SHEET_COLUMNS for row in sheet)  # what ppi's command writes
        v = Viewer(tmp_path / "outputs", tmp_path / "viewer-cache")
        try:
            _shot(tmp_path, v.url + "/runs/r/sheet?rater=ann", "viewer-sheet", "1280,760")
            for row in sheet:  # the sheet in its order, each row's verdict the truth
                status, page = v.get("/runs/r/sheet?rater=ann")
                assert status == 200 and f'data-rid="{row["response_id"]}" data-cid="{row["criterion_id"]}"' in page
                assert (
                    row["scale"] == "binary"
                    and 'data-met="false"' in page
                    and 'button type="button" data-score' not in page
                )
                truth = _right(row["candidate"], int(row["example_id"].split("/q")[1]))
                label = {"response_id": row["response_id"], "criterion_id": row["criterion_id"], "rater": "ann"}
                assert v.post("/api/runs/r/labels", {**label, "met": truth})[0] == 201
            assert "Every row of the sheet is labelled by ann" in v.get("/runs/r/sheet?rater=ann")[1]
            # a score on this met / not met dataset is refused: the run could not read the file with it
            status, err = v.post("/api/runs/r/labels", {**label, "score": 3})
            assert status == 400 and "give `met`" in err["error"], err
        finally:
            v.close()
        raw = yaml.safe_load(cfg.read_text())
        raw["datasets"][0]["labels"] = str(run / "labels.jsonl")
        cfg.write_text(yaml.safe_dump(raw))
        calls = srv.count()
        _run(cfg, "r")  # the same run id: every call from the cache
        assert srv.count() == calls

    summary = json.loads((run / "summary.json").read_text())
    d = summary["datasets"]["r"]
    assert (d["labels"]["file"], d["labels"]["rows"], d["labels"]["responses"]) == (str(run / "labels.jsonl"), 24, 24)
    for cand in ("alpha", "beta"):
        ppi = d["candidates"][cand]["ppi"]
        assert ppi["n_labelled"] == 12 and ppi["estimate"] is not None
        assert ppi["estimate"] < ppi["judge_only"]["estimate"]  # the humans pull the lenient judge's score down
    assert d["ppi_paired"] and d["ppi_paired"][0]["estimate"] is not None

    v = Viewer(tmp_path / "outputs", tmp_path / "viewer-cache")
    try:
        status, page = v.get("/runs/r")
        if CHROMIUM is not None:  # as a person sees it
            text = _visible_text(_dom(tmp_path, v.url + "/runs/r"))
            assert "Anchored to human labels" in text and "24 verdicts on 24 items" in text
            _shot(tmp_path, v.url + "/runs/r", "viewer-anchored", "1280,1100")
    finally:
        v.close()
    assert status == 200
    anchored = _anchored_section(page)
    for cand in ("alpha", "beta"):
        assert f"<b>{d['candidates'][cand]['ppi']['estimate']:.3f}</b>" in anchored
    assert anchored == _anchored_section((run / "report.html").read_text())  # the report's own section


def test_graded_labels_are_scores_on_the_scale(tmp_path: Path) -> None:
    """On a dataset judged on 1-5 the viewer offers a score per point of the scale, refuses `met` and a score off
    the scale, and what it appends is what data/labels.py reads for that scale."""
    from rubricrun.data.labels import read_labels

    rubric = [{"id": "c1", "text": "CRIT-ONE: greets.", "weight": 1}, {"id": "c2", "text": "CRIT-TWO: polite."}]

    def graded(body: dict[str, Any]) -> str:
        if body.get("response_format"):
            return json.dumps(
                {"reasoning": "Scored.", "score": 4 if "CRIT-ONE" in message_text(body["messages"][-1]) else 2}
            )
        return default_reply(body)

    data = write_jsonl(tmp_path / "g.jsonl", [{"id": f"g{i}", "prompt": f"Hi {i}", "rubric": rubric} for i in range(3)])
    with FakeOpenAIServer(responder=graded) as srv:
        _small_run(tmp_path, srv, data, "g", {"scale": "1-5"})
    run = tmp_path / "outputs" / "g"
    _cli(["--label-sheet", str(run)])
    sheet = read_jsonl(run / "label_sheet.jsonl")
    assert sheet and all(row["scale"] == "1-5" for row in sheet)
    j = next(j for j in read_jsonl(run / "judgments.jsonl") if j.get("kind") != "pairwise")
    v = Viewer(tmp_path / "outputs", tmp_path / "viewer-cache")
    try:
        page = v.get("/runs/g/sheet")[1]
        assert 'data-score="1"' in page and 'data-score="5"' in page and 'button type="button" data-met' not in page
        page = v.get(f"/runs/g/examples/{quote(j['example_id'], safe='/')}")[1]
        cell = page.split(f'data-rid="{j["response_id"]}" data-cid="{j["criterion_id"]}"', 1)[1].split("</div>", 1)[0]
        assert 'data-score="5"' in cell and "data-met" not in cell
        label = {"response_id": j["response_id"], "criterion_id": j["criterion_id"]}
        status, err = v.post("/api/runs/g/labels", {**label, "met": True})
        assert status == 400 and "give `score`" in err["error"]
        status, err = v.post("/api/runs/g/labels", {**label, "score": 7})
        assert status == 400 and "1-5 scale" in err["error"]
        assert v.post("/api/runs/g/labels", {**label, "score": 4, "rater": "ann"})[0] == 201
        assert v.post("/api/runs/g/labels", {**label, "score": 2})[0] == 201
        raters = {"ann": 4.0, "": 2.0}
        if CHROMIUM is not None and CHROMEDRIVER is not None:  # a press of a score button (viewer.js)
            with Driver(tmp_path) as d:
                d.get(f"{v.url}/runs/g/examples/{quote(j['example_id'], safe='/')}")
                d.type("#rater", "bea")
                box = f'[data-rid="{j["response_id"]}"][data-cid="{j["criterion_id"]}"]'
                d.click(f'{box} button[data-score="3"]')
                d.wait(lambda: d.text("#label-status") == "saved to labels.jsonl", message="the label saved")
                assert "bea: score 3" in d.text(f"{box} .humans")
            raters["bea"] = 3.0
    finally:
        v.close()
    got = read_labels(str(run / "labels.jsonl"), scale=(1.0, 5.0))
    assert got.verdicts == {(j["response_id"], j["criterion_id"]): raters} and got.rows == len(raters)


# --------------------------------------------------------------------------------------------------
# The JSON twin, filters and search against the files


def test_api_responses_are_the_rows_with_their_judgments(outputs: Path, viewer: Viewer) -> None:
    responses = _rows(outputs, "before", "responses")
    judgments = [j for j in _rows(outputs, "before", "judgments") if j.get("kind") != "pairwise"]
    got = viewer.json("/api/runs/before/responses?limit=500")
    assert got["total"] == len(responses)
    assert [{k: v for k, v in r.items() if k != "judgments"} for r in got["rows"]] == responses
    for r in got["rows"]:
        assert r["judgments"] == [j for j in judgments if j["response_id"] == r["id"]]
    page = viewer.json("/api/runs/before/responses?offset=5&limit=3")
    assert [r["id"] for r in page["rows"]] == [r["id"] for r in responses[5:8]]
    runs = viewer.json("/api/runs")
    assert [r["run_id"] for r in runs] == ["after", "before"] and runs[0]["status"] == "complete"
    assert viewer.get("/api/runs/before/responses?offset=x")[0] == 400
    assert viewer.get("/api/runs/nope/responses")[0] == 404
    assert viewer.get("/runs/..%2Fbefore")[0] == 404


def _ids(viewer: Viewer, run: str = "before", **query: str) -> set[str]:
    got = viewer.json(f"/api/runs/{run}/responses?" + urlencode({**query, "limit": 500}))
    assert got["total"] == len(got["rows"])
    return {r["id"] for r in got["rows"]}


def test_filters_and_search_find_what_the_files_hold(outputs: Path, viewer: Viewer) -> None:
    examples = {ex["id"]: ex for ex in _rows(outputs, "before", "examples")}
    responses = _rows(outputs, "before", "responses")
    judgments = [j for j in _rows(outputs, "before", "judgments") if j.get("kind") != "pairwise"]
    c = judgments[0]["criterion_id"]
    want = {j["response_id"] for j in judgments if j["criterion_id"] == c and j["verdict"] == "not_met"}
    assert _ids(viewer, criterion=c, verdict="not_met") == want
    voted = {j["response_id"] for j in judgments for v in j["votes"] if v["judge"] == "j2" and v["verdict"] == "met"}
    assert voted and _ids(viewer, judge="j2", verdict="met") == voted
    assert _ids(viewer, dataset="mc", candidate="beta") == {
        r["id"] for r in responses if r["candidate"] == "beta" and examples[r["example_id"]]["dataset"] == "mc"
    }
    assert _ids(viewer, q="thought-marker-51c") == {r["id"] for r in responses if r["candidate"] == "alpha"}
    said = {j["response_id"] for j in judgments if "judge-two says" in json.dumps([j["explanation"], j["votes"]])}
    assert said and _ids(viewer, q="judge-two") == said  # in the explanations, a vote's too
    prompt = {r["id"] for r in responses if "primary colors" in json.dumps(examples[r["example_id"]]["messages"])}
    assert prompt and _ids(viewer, q="PRIMARY colors") == prompt
    assert _ids(viewer, q="prim* colo*") == prompt
    assert _ids(viewer, judge="nobody") == set() and _ids(viewer, verdict="maybe") == set()
    scored = viewer.json("/api/runs/before/responses?sort=score&limit=500")["rows"]
    assert [r["id"] for r in scored] != [r["id"] for r in responses]


def test_compare_lists_the_flips_as_compare_does(outputs: Path, viewer: Viewer, tmp_path: Path) -> None:
    from rubricrun.results.compare import write_compare

    expected = json.loads(
        (write_compare(outputs / "before", outputs / "after", tmp_path / "cmp") / "compare.json").read_text()
    )
    flips = [f for d in expected["datasets"].values() for f in d["flips"]]
    got = viewer.json("/api/compare/before/after")
    assert flips and [{k: v for k, v in f.items() if k != "url"} for f in got["flips"]] == flips
    for name, d in expected["datasets"].items():
        assert got["datasets"][name]["candidates"] == d["candidates"]
    first = got["flips"][0]
    assert first["url"] == f"/runs/after/examples/{quote(first['example_id'], safe='/')}"
    status, page = viewer.get("/compare/before/after")
    assert status == 200 and f"Flipped verdicts ({len(flips)})" in page
    assert f'href="{first["url"]}#{quote(first["response_id"], safe="/")}"' in page


# --------------------------------------------------------------------------------------------------
# Live runs, the index, safety


def _lines(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


class LiveRun:
    """A run folder written as a run writes it, its `.lock` naming a live process; rows from run `before`."""

    def __init__(self, outputs: Path, tmp: Path) -> None:
        self.examples, self.responses = _rows(outputs, "before", "examples"), _rows(outputs, "before", "responses")
        self.judgments = _rows(outputs, "before", "judgments")
        self.path = tmp / "out" / "live"
        self.path.mkdir(parents=True)
        (self.path / "config.yaml").write_bytes((outputs / "before" / "config.yaml").read_bytes())
        self.holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        self.start()
        self.append("examples", self.examples[:1])
        self.append("responses", self.of("responses", 0))
        self.append("judgments", [])

    def of(self, name: str, k: int) -> list[dict[str, Any]]:
        """The rows of `name` of the k-th example (pairwise judgments left out)."""
        rows = self.responses if name == "responses" else self.judgments
        return [r for r in rows if r["example_id"] == self.examples[k]["id"] and r.get("kind") != "pairwise"]

    def start(self) -> None:
        """As a run (re)starting does: its lock rewritten (a new mtime), its row files started afresh."""
        time.sleep(0.01)
        (self.path / ".lock").write_text(f"pid {self.holder.pid}\n")
        for name in ("examples", "responses", "judgments"):
            (self.path / f"{name}.jsonl").write_text("")

    def append(self, name: str, rows: list[dict[str, Any]], extra: str = "") -> None:
        with open(self.path / f"{name}.jsonl", "a") as fh:
            fh.write(_lines(rows) + extra)

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()


def test_the_index_follows_a_growing_run(outputs: Path, tmp_path: Path) -> None:
    """New whole lines are indexed as they land, a half line waits, a restart or a file written afresh (a batch
    run's next pass) is indexed anew; nothing lands in the run folder."""
    live = LiveRun(outputs, tmp_path)
    v = Viewer(tmp_path / "out", tmp_path / "cache")
    try:
        first, second = live.of("responses", 0), live.of("responses", 1)
        assert v.json("/api/runs/live")["status"] == "running"
        assert v.json("/api/runs/live/responses")["total"] == len(first)
        live.append("examples", live.examples[1:2])
        live.append("responses", second, '{"id": "half a line')
        assert v.json("/api/runs/live")["responses"] == len(first) + len(second)  # the half line waits
        live.append("judgments", live.of("judgments", 0))
        met = {j["response_id"] for j in live.of("judgments", 0) if j["verdict"] == "met"}
        assert _ids(v, "live", verdict="met") == met
        live.start()  # started again: everything afresh
        live.append("examples", live.examples[:1])
        live.append("responses", first[:1])
        assert [r["id"] for r in v.json("/api/runs/live/responses")["rows"]] == [first[0]["id"]]
        (live.path / "responses.jsonl").write_text(_lines(first[1:] + second[:1]))  # afresh, same start, longer
        assert [r["id"] for r in v.json("/api/runs/live/responses")["rows"]] == [
            r["id"] for r in first[1:] + second[:1]
        ]
    finally:
        v.close()
        live.close()
    assert sorted(p.name for p in live.path.iterdir()) == [".lock", "config.yaml"] + [
        f"{n}.jsonl" for n in ("examples", "judgments", "responses")
    ]


@needs_driver
def test_a_running_run_shows_rows_as_they_land(outputs: Path, tmp_path: Path) -> None:
    """The list page of a running run polls: rows appended after it opened appear without a reload."""
    live = LiveRun(outputs, tmp_path)
    v = Viewer(tmp_path / "out", tmp_path / "cache")
    try:
        with Driver(tmp_path) as d:
            d.get(v.url + "/runs/live/examples")
            assert d.text("#total") == str(len(live.of("responses", 0)))
            live.append("examples", live.examples[1:2])
            live.append("responses", live.of("responses", 1))
            want = str(len(live.of("responses", 0)) + len(live.of("responses", 1)))
            d.wait(lambda: d.text("#total") == want, message="the new rows")
            assert live.examples[1]["id"] in d.script("return document.getElementById('rows').textContent")
    finally:
        v.close()
        live.close()


def test_a_dead_run_without_summary_is_unfinished(tmp_path: Path, outputs: Path, viewer: Viewer) -> None:
    run = tmp_path / "o" / "gone"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("candidates: [{name: a}]\n")
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    (run / ".lock").write_text(f"pid {proc.pid}\n")
    v = Viewer(tmp_path / "o", tmp_path / "c")
    try:
        assert v.json("/api/runs")[0]["status"] == "unfinished"
        assert v.get("/runs/gone")[0] == 200
    finally:
        v.close()


def test_only_loopback_hosts_are_answered(viewer: Viewer) -> None:
    assert viewer.get("/", {"Host": "evil.example:80"})[0] == 403
    assert viewer.get("/", {"Host": f"localhost:{viewer.server.server_port}"})[0] == 200
    status, _ = viewer.get("/")
    assert status == 200
    with urllib.request.urlopen(viewer.url + "/") as resp:
        csp = resp.headers["Content-Security-Policy"]
    assert "script-src 'nonce-" in csp and "default-src 'none'" in csp
    assert [_hostname(h) for h in ("127.0.0.1:8765", "[::1]:80", "localhost")] == ["127.0.0.1", "::1", "localhost"]
    assert fts_query('say "hi" now*') == '"say" "hi" "now"*' and fts_query("!!") is None


# --------------------------------------------------------------------------------------------------
# The command line


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_view_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    run = [sys.executable, str(REPO / "run.py")]
    got = subprocess.run([*run, "--view", str(tmp_path / "missing")], capture_output=True, text=True, timeout=60)
    assert got.returncode == 2 and got.stderr.count("\n") == 1 and "no such folder" in got.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        got = subprocess.run(
            [*run, "--view", str(tmp_path), "--port", str(port)], capture_output=True, text=True, timeout=60, env=_env()
        )
    assert got.returncode == 2 and got.stderr.count("\n") == 1 and "cannot listen" in got.stderr, got.stderr
    for args in (
        ["--port", "1"],
        ["--view", str(tmp_path), "--config", "x.yaml"],
        ["--view", str(tmp_path), "--port", "70000"],
    ):
        got = subprocess.run([*run, *args], capture_output=True, text=True, timeout=60)
        assert got.returncode == 2 and got.stderr.count("\n") == 1, (args, got.stderr)


def test_view_serves_until_ctrl_c(outputs: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "run.py"), "--view", str(outputs), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**_env(), "XDG_CACHE_HOME": str(tmp_path / "xdg")},
        # A shell's Ctrl+C: SIGINT at its default, whatever pytest was started with (a background job of a shell
        # starts with SIGINT ignored, and a child inherits an ignored signal: ExecPlan 022, Surprises).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        with urllib.request.urlopen(url + "api/runs", timeout=60) as resp:
            assert {r["run_id"] for r in json.loads(resp.read())} == {"before", "after"}
        with urllib.request.urlopen(url + "api/runs/before", timeout=60) as resp:
            assert json.loads(resp.read())["responses"] == len(_rows(outputs, "before", "responses"))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (tmp_path / "xdg" / "rubricrun" / "viewer").is_dir()  # the index lives in the viewer's own cache
