"""End to end: a tiny study, its report, a rebuild from the database, and a real browser."""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pelab.rules import ERROR
from pelab.rules import VERDICTS as ALL_VERDICTS

TINY = Path(__file__).parent / "data" / "tiny_study.toml"
VERDICTS = set(ALL_VERDICTS) - {ERROR}  # a claim whose evidence raised is a failure here


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "study"
    r = subprocess.run(
        [sys.executable, "-m", "pelab", "study", str(TINY), "--out", str(out), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "report:" in r.stdout and "claims" in r.stdout
    return out


def test_every_claim_has_a_section_and_a_verdict(study_dir: Path) -> None:
    claims = json.loads((study_dir / "claims.json").read_text())
    ids = [c["id"] for c in claims]
    from pelab.report.catalog import all_claims

    assert ids == [spec.id for spec in all_claims()]
    assert len(ids) >= 15
    html = (study_dir / "report.html").read_text()
    md = (study_dir / "report.md").read_text()
    for c in claims:
        assert c["verdict"] in VERDICTS, c
        assert f'id="{c["id"].lower()}"' in html
        assert f"## {c['id']} ·" in md
    # Every claim drawn from trained arms cites stored runs.
    stored = {p.stem for p in (study_dir / "checkpoints").glob("*.safetensors")}
    for c in claims:
        assert set(c["runs"]) <= stored


def test_the_markdown_opens_with_the_answer_then_the_figure_then_the_published_table(study_dir: Path) -> None:
    md = (study_dir / "report.md").read_text()
    first = md[md.index("## What this run says") : md.index("## Every claim")]
    sentences = [line for line in first.splitlines() if re.search(r"\(\[C\d+\]\(#c\d+\)\)\.$", line)]
    assert 1 <= len(sentences) <= 5
    for line in sentences:  # each links to its claim's section, which exists
        cid = re.search(r"\[(C\d+)\]\(#(c\d+)\)\)\.$", line)
        assert cid and f'<a id="{cid.group(2)}"></a>' in md and cid.group(1).lower() == cid.group(2)
    at = [first.index(x) for x in (sentences[0], "figures/overview-forest.png", "### Published vs measured", "Scale:")]
    assert at == sorted(at)
    assert (study_dir / "figures" / "overview-forest.png").read_bytes()[:4] == b"\x89PNG"
    assert md.index("## Every claim") < md.index("## C1 ·") < md.index("## C19 ·")
    assert "<pre" not in md and "<table" not in md  # no raw HTML walls: <details> and anchors only


def test_the_report_prints_the_protocol_its_runs_were_trained_under(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first training wrote protocol.json (the rules' sha256, the commit, the study file's sha256); the report's
    method line prints it; every comparison of a study without a confirmatory grid is exploratory, in claims.json and
    in its tables. A rule file that differs after the runs trips the "changed since" sentence (here: one more file
    counted among the rules), and so does a different study file."""
    from pelab.report.build import load_context
    from pelab.report.context import protocol_line
    from pelab.study import protocol as pr

    record = json.loads((study_dir / pr.RECORD).read_text())
    assert record["rules"]["sha256"] == pr.rules_sha256() and record["later"] == []
    assert record["study"]["sha256"] == pr.text_sha256(TINY.read_text())
    md = (study_dir / "report.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("- Protocol: "))
    assert line.startswith(f"- Protocol: rules sha256 {record['rules']['sha256'][:12]}… (")
    assert f"fixed on {record['fixed'][:10]}" in line and "changed since" not in line
    claims = json.loads((study_dir / "claims.json").read_text())
    rows = [r for c in claims for r in c["rows"] if "reading" in r]
    assert rows and {r["reading"] for r in rows} == {"exploratory"}
    read = [c for c in claims if any(r.get("metric") and "reading" in r for r in c["rows"])]  # a row on a metric
    assert all(c["reading"] == "exploratory" for c in read), [(c["id"], c["reading"]) for c in read]
    ctx = load_context(study_dir)
    said = line.removeprefix("- Protocol: ").split(". A comparison is confirmatory")[0]
    assert protocol_line(ctx) == f"protocol: {said}"
    monkeypatch.setattr(pr, "RULE_FILES", (*pr.RULE_FILES, "report/build.py"))
    assert "the rules changed since these runs were trained: the verdicts below are read by newer rules" in (
        protocol_line(ctx).replace(f" (now sha256 {pr.rules_sha256()[:12]}…)", "")
    )
    ctx.study.source += "\n# edited after the runs\n"
    assert "the study file changed since these runs were trained" in protocol_line(ctx)


def test_report_rebuilds_from_the_database_alone(study_dir: Path) -> None:
    def stable(text: str) -> str:
        return re.sub(r"report time.*", "", text)

    before = (study_dir / "report.md").read_text()
    r = subprocess.run([sys.executable, "-m", "pelab", "report", str(study_dir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert stable((study_dir / "report.md").read_text()) == stable(before)


def test_user_text_is_escaped(study_dir: Path) -> None:
    html = (study_dir / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html  # the report runs no script at all


def test_html_is_self_contained(study_dir: Path) -> None:
    html = (study_dir / "report.html").read_text()
    sources = re.findall(r'<img src="([^"]+)"', html)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "http://" not in html and "https://" not in html


def _browser() -> tuple[str, str] | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


@pytest.mark.skipif(_browser() is None, reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")
def test_report_in_headless_chromium(study_dir: Path, tmp_path: Path) -> None:
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (the test extra)")
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = _browser()  # type: ignore[misc]
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
                 "--window-size=1200,2000"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        browser.get((study_dir / "report.html").resolve().as_uri())
        widths = browser.execute_script("return Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
        assert widths and all(w > 0 for w in widths), widths
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        assert "pelab" in browser.title
        shot = study_dir / "report-screenshot.png"
        browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # Every badge is one of the verdict styles, none the fallback.
        assert browser.execute_script("return document.querySelectorAll('.verdict').length") >= len(VERDICTS)
        assert browser.execute_script("return document.querySelectorAll('.verdict.v-other').length") == 0

        # A wide screen and a phone: nothing scrolls sideways, neither the page nor any table or code block.
        shots = {}
        for name, width in (("desktop", 1300), ("phone", 360)):
            _viewport(browser, width, 900)
            assert browser.execute_script("return window.innerWidth") == width
            _assert_fits(browser)
            if name == "desktop":
                shots["first-screen"] = _screenshot(browser, tmp_path / "first-screen.png", full=False)
            shots[name] = _screenshot(browser, tmp_path / f"{name}.png", full=True)
            browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
            _assert_fits(browser)  # the folded tables too
            browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = false)")
        # The first screen answers: its sentences link to claims, then the one figure, then the published table.
        order = browser.execute_script(
            """const a = document.querySelector('#answer');
            const kids = Array.from(a.querySelectorAll('p.sentence, figure, table'));
            return kids.map(k => k.tagName);"""
        )
        assert order[0] == "P" and "FIGURE" in order and order.index("FIGURE") < order.index("TABLE"), order
        if os.environ.get("PELAB_SCREENSHOTS"):  # copies for a reader of the test run (never needed by it)
            keep = Path(os.environ["PELAB_SCREENSHOTS"])
            keep.mkdir(parents=True, exist_ok=True)
            for name, path in shots.items():
                shutil.copyfile(path, keep / f"{name}.png")

        # Print, on an A4-ish page: the same, and folded run lists come out open where CSS can do it.
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
        _viewport(browser, 800, 1130)
        _assert_fits(browser)
        if browser.execute_script("return CSS.supports('selector(::details-content)')"):
            hidden = browser.execute_script(
                "return Array.from(document.querySelectorAll('details.runs .ids')).filter(e => !e.offsetHeight).length"
            )
            assert hidden == 0, f"{hidden} run lists stay folded in print"
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        pdf = base64.b64decode(browser.print_page())
        assert pdf[:5] == b"%PDF-" and len(pdf) > 10_000
    finally:
        browser.quit()


def _viewport(browser: Any, width: int, height: int) -> None:
    """Emulate a screen of this size (a headless window will not shrink below 500 px).

    Not as a mobile device: one zooms out to fit a page too wide, and window.innerWidth
    grows with it, so the overflow check would pass whatever the page did."""
    browser.set_window_size(max(width, 500), height)
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def _assert_fits(browser: Any) -> None:
    """No horizontal scrolling: the page is no wider than the window, and no table or code block is wider than
    its box or sticks out of the window; names the elements that do when there are."""
    page, screen, wide = browser.execute_script(
        """const w = window.innerWidth;
        const wide = Array.from(document.querySelectorAll('body *'))
            .filter(e => e.getBoundingClientRect().right > w + 1
                || (['TABLE', 'PRE'].includes(e.tagName) && e.scrollWidth > e.clientWidth + 1))
            .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
        return [document.documentElement.scrollWidth, w, wide];"""
    )
    assert page <= screen + 1 and not wide, (page, screen, wide)


def _screenshot(browser: Any, path: Path, full: bool) -> Path:
    """The window, or (``full``) the whole page at the window's width, as a PNG."""
    params: dict[str, Any] = {"format": "png"}
    if full:
        width, height = browser.execute_script("return [window.innerWidth, document.documentElement.scrollHeight]")
        clip = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        params |= {"captureBeyondViewport": True, "clip": clip}
    data = base64.b64decode(browser.execute_cdp_cmd("Page.captureScreenshot", params)["data"])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    path.write_bytes(data)
    return path


def test_an_interim_look_decides_as_the_report_does_without_drawing_and_measures_once(
    study_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sequential study's look (``decide_claims``) reads verdicts only: the same verdicts and rows as the report,
    no figure and no analysis of a displayed run. A second look measures nothing again (the memo, and the measures
    kept in the database), unless a checkpoint was replaced by other weights: then that run alone is measured
    again. The same weights rewritten as a new file are not (their sha256 is the stored one)."""
    from pelab.report import build, context

    copy = tmp_path / "look"
    shutil.copytree(study_dir, copy)
    for folder in ("figures", "analyses"):
        shutil.rmtree(copy / folder, ignore_errors=True)
    calls: list[tuple[str, str]] = []
    job = context.measure_job

    def counted(folder: str, name: str, run_id: str, at_init: bool) -> dict:
        calls.append((name, run_id))
        return job(folder, name, run_id, at_init)

    monkeypatch.setattr(context.ReportContext, "learned_runs", _every_run)
    shown = tmp_path / "shown"
    shutil.copytree(copy, shown)
    build.build_report(shown)
    monkeypatch.setattr(context, "measure_job", counted)
    monkeypatch.setattr(context, "_MEMO", {})
    monkeypatch.setattr(build, "report_pool", lambda: contextlib.nullcontext(None))  # measures run here, counted
    central = ("C2", "C6", "C7", "C9", "C10", "C18")  # the claims the presets' looks read
    first = build.decide_claims(copy, central)
    reported = [c for c in json.loads((shown / "claims.json").read_text()) if c["id"] in central]
    assert [(c.id, c.verdict, c.key) for c in first] == [(c["id"], c["verdict"], c["key"]) for c in reported]
    assert json.dumps([c.rows for c in first], sort_keys=True, default=str) == json.dumps(
        [c["rows"] for c in reported], sort_keys=True, default=str
    )
    assert not (copy / "figures").exists() or not any((copy / "figures").iterdir())
    assert calls, "the tiny study's claims measure stored models"
    measured = list(calls)
    calls.clear()
    again = build.decide_claims(copy, central)
    assert calls == [] and [(c.id, c.verdict, c.key) for c in again] == [(c.id, c.verdict, c.key) for c in first]
    run = measured[0][1]
    ckpt = copy / "checkpoints" / f"{run}.safetensors"
    data = ckpt.read_bytes()
    ckpt.unlink()
    ckpt.write_bytes(data)  # the same weights under a new file: the memo misses, the stored sha256 matches
    build.decide_claims(copy, central)
    assert calls == []
    _nudge(ckpt)  # other weights: that run alone is measured again
    build.decide_claims(copy, central)
    assert calls and {r for _, r in calls} == {run}


def _every_run(self: Any, arm: pd.DataFrame) -> list[str]:
    """``ReportContext.learned_runs`` for the tiny study, which learns nothing in 25 steps: every finished run
    that can be measured reads as learned, so there is something to measure (the report and the look alike). One
    that cannot is noted as the real one notes it, so the report's header names it."""
    runs = [str(r) for r in arm[arm.status == "done"].sort_values("seed").run_id]
    self.unmeasurable.update(r for r in runs if not self.measurable(r))
    return [r for r in runs if self.measurable(r)]


def _maker() -> Any:
    """docs/make_results.py, which publishes full's run (not a package module)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_results", Path(__file__).parents[1] / "docs" / "make_results.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nudge(ckpt: Path) -> None:
    """Replace a checkpoint with other weights of the same model (one tensor moved by 1e-3), as a new file."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(ckpt), "pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a mapping)
    name = next(k for k, v in sorted(tensors.items()) if v.is_floating_point())
    tensors[name] = tensors[name] + 1e-3
    ckpt.unlink()
    save_file(tensors, str(ckpt), metadata=meta)


def test_a_rebuilt_report_reads_its_measures_from_the_database_and_says_the_same(
    study_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process (a resumed study, ``pelab report`` again) reads every measure an earlier report kept, keyed by
    its checkpoint's sha256, instead of measuring again; the report it writes is the one measured afresh. A stored
    value that does not hold together, or one taken on other weights, is measured again, never believed."""
    import sqlite3

    from pelab.report import build, context

    calls: list[tuple[str, str, bool]] = []
    job = context.measure_job

    def counted(folder: str, name: str, run_id: str, at_init: bool) -> dict:
        calls.append((name, run_id, at_init))
        return job(folder, name, run_id, at_init)

    monkeypatch.setattr(context.ReportContext, "learned_runs", _every_run)
    monkeypatch.setattr(context, "measure_job", counted)
    monkeypatch.setattr(build, "report_pool", lambda: contextlib.nullcontext(None))  # measures run here, counted
    copy = tmp_path / "again"
    shutil.copytree(study_dir, copy)
    with sqlite3.connect(copy / "results.sqlite") as db:
        db.execute("DELETE FROM measures")
    monkeypatch.setattr(context, "_MEMO", {})
    build.build_report(copy)
    first = (copy / "claims.json").read_text()
    with sqlite3.connect(copy / "results.sqlite") as db:
        kept = db.execute("SELECT run_id, key, checkpoint FROM measures ORDER BY run_id, key").fetchall()
    assert calls and sorted(calls) == sorted(tuple(json.loads(k)[1:]) for _, k, _ in kept), "each measure, kept once"
    for run_id, _, digest in kept:
        ckpt = copy / "checkpoints" / f"{run_id}.safetensors"
        assert digest == hashlib.sha256(ckpt.read_bytes()).hexdigest()

    calls.clear()
    monkeypatch.setattr(context, "_MEMO", {})  # another process
    build.build_report(copy)
    assert calls == []
    assert (copy / "claims.json").read_text() == first

    planted = kept[0]
    other = next(k for k in kept if k[0] != planted[0])
    with sqlite3.connect(copy / "results.sqlite") as db:  # a received folder's hand-edited value
        db.execute("UPDATE measures SET value = ? WHERE run_id = ? AND key = ?", ('{"x": "rm -rf"}', *planted[:2]))
    _nudge(copy / "checkpoints" / f"{other[0]}.safetensors")
    monkeypatch.setattr(context, "_MEMO", {})
    build.build_report(copy)
    assert tuple(json.loads(planted[1])[1:]) in calls
    assert {r for _, r, _ in calls} == {planted[0], other[0]}

    calls.clear()
    monkeypatch.setattr(context, "measuring_code", lambda: "a pelab whose probes changed")
    monkeypatch.setattr(context, "_MEMO", {})
    build.build_report(copy)  # the kept measures are another code's: every one is taken again
    assert sorted(calls) == sorted(tuple(json.loads(k)[1:]) for _, k, _ in kept)


def test_a_study_whose_measures_were_all_kept_travels_without_its_weights(
    study_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pelab report --keep-measures`` takes every measure a report could read of every finished run, of arms that
    learned or not (the tiny study learns nothing; the report below reads every run as learned, as an arm above
    the floor after a later round's seeds would be), and those of the runs a report only shows, and writes no
    report. Carried as its database alone, the folder's report then measures nothing and stops on nothing."""
    import sqlite3

    from typer.testing import CliRunner

    from pelab.cli import app
    from pelab.errors import PelabError
    from pelab.report import build, context

    calls: list[tuple[str, str, bool]] = []
    job = context.measure_job

    def counted(folder: str, name: str, run_id: str, at_init: bool) -> dict:
        calls.append((name, run_id, at_init))
        return job(folder, name, run_id, at_init)

    monkeypatch.setattr(context, "measure_job", counted)
    monkeypatch.setattr(build, "report_pool", lambda: contextlib.nullcontext(None))  # measures run here, counted
    copy = tmp_path / "carried"
    shutil.copytree(study_dir, copy)
    for name in ("report.md", "report.html", "claims.json"):
        (copy / name).unlink()
    with sqlite3.connect(copy / "results.sqlite") as db:
        db.execute("DELETE FROM measures")
    monkeypatch.setattr(context, "_MEMO", {})
    r = CliRunner().invoke(app, ["report", str(copy), "--keep-measures"])
    assert r.exit_code == 0, r.output
    assert calls and re.search(rf"{len(set(calls))} measure\(s\) of stored models kept", " ".join(r.output.split()))
    assert not any((copy / name).exists() for name in ("report.md", "claims.json"))  # no verdict written
    gone = copy / "checkpoints" / f"{calls[0][1]}.safetensors"
    gone.rename(tmp_path / "aside.safetensors")
    with sqlite3.connect(copy / "results.sqlite") as db:
        db.execute("DELETE FROM measures WHERE run_id = ?", (calls[0][1],))
    r = CliRunner().invoke(app, ["report", str(copy), "--keep-measures"])  # it would travel with neither
    assert isinstance(r.exception, PelabError)  # the CLI's entry point makes it one line
    assert "1 finished run(s) have neither readable weights nor kept measures" in str(r.exception)
    (tmp_path / "aside.safetensors").rename(gone)
    r = CliRunner().invoke(app, ["report", str(copy), "--keep-measures"])
    assert r.exit_code == 0, r.output

    published, unpacked = tmp_path / "published", tmp_path / "unpacked"
    published.mkdir()
    unpacked.mkdir()
    _maker().publish_database(copy, published)
    (unpacked / "results.sqlite").write_bytes(gzip.decompress((published / "results.sqlite.gz").read_bytes()))
    for name in ("protocol.json", "sequential.json"):
        if (published / name).exists():
            shutil.copyfile(published / name, unpacked / name)
    calls.clear()
    monkeypatch.setattr(context.ReportContext, "learned_runs", _every_run)
    monkeypatch.setattr(context, "_MEMO", {})
    build.build_report(unpacked)  # every arm learned, figures of the shown runs asked for: all kept
    assert calls == []
    assert json.loads((unpacked / "claims.json").read_text())
    assert "neither readable weights" not in (unpacked / "report.md").read_text()  # no run left out either

    monkeypatch.setattr(context, "measuring_code", lambda: "a pelab whose probes changed")
    monkeypatch.setattr(context, "_MEMO", {})
    with pytest.raises(PelabError, match="weights are gone and its measures were kept by other measuring code"):
        build.build_report(unpacked)  # never a silent drop of the runs whose measures another code took


TUNED = """
name = "tiny tuned study"
seeds = [0, 1]

[task]
name = "reverse"
length = 5
vocab = 8

[model]
d = 16
n_layers = 1
n_heads = 2

[train]
steps = 25
eval_batches = 2
eval_batch_size = 32

[[grid]]
name = "input"
set = { "train.lr" = [3e-3, 3e-2] }
axes = { "model.position.scheme" = ["learned"], "model.combine" = ["add", "concat_split"] }

[[grid]]
name = "attention"
set = { "model.combine" = "none" }
axes = { "model.position.scheme" = ["none", "untied"] }
"""


def test_kept_measures_cover_every_rate_a_tuned_arm_may_be_read_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tuned arm keeps the rate its validation loss chooses today; after a later round's seeds it may choose
    another, when the weights of the runs at that rate are gone. ``--keep-measures`` takes every rate's, so the
    report of the carried database, read at the rates chosen and at the rates a choice on the reversed validation
    loss would keep, measures nothing and leaves out no run."""
    import sqlite3

    from typer.testing import CliRunner

    from pelab.cli import app
    from pelab.report import build, context, rates
    from pelab.study.grid import parse_study

    toml = tmp_path / "tuned.toml"
    toml.write_text(TUNED)
    out = tmp_path / "study"
    r = subprocess.run(
        [sys.executable, "-m", "pelab", "study", str(toml), "--out", str(out), "--workers", "2"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]

    calls: list[tuple[str, str, bool]] = []
    job = context.measure_job

    def counted(folder: str, name: str, run_id: str, at_init: bool) -> dict:
        calls.append((name, run_id, at_init))
        return job(folder, name, run_id, at_init)

    monkeypatch.setattr(context, "measure_job", counted)
    monkeypatch.setattr(build, "report_pool", lambda: contextlib.nullcontext(None))
    monkeypatch.setattr(context, "_MEMO", {})
    with sqlite3.connect(out / "results.sqlite") as db:  # what the study's own report measured: taken again
        db.execute("DELETE FROM measures")
    r = CliRunner().invoke(app, ["report", str(out), "--keep-measures"])
    assert r.exit_code == 0, r.output
    measured = {run for _, run, _ in calls}
    study = parse_study(TUNED)
    rates_measured = {r.train.lr for r in study.runs if r.run_id in study.tuned and r.run_id in measured}
    assert rates_measured == {3e-3, 3e-2}  # both rates of the tuned arms
    shutil.rmtree(out / "checkpoints")  # it travels as its database alone

    choose = rates.choose
    picked: list[list[float]] = []

    def choosing(sign: float) -> Any:
        """``rates.choose`` on the validation loss times ``sign``: -1 keeps each arm's worst rate instead."""

        def chooser(frame: pd.DataFrame, tuned_ids: set[str]) -> Any:
            out_frame, choices = choose(frame.assign(**{rates.CHOOSE_ON: sign * frame[rates.CHOOSE_ON]}), tuned_ids)
            picked.append([c.chosen for c in choices])
            return out_frame, choices

        return chooser

    monkeypatch.setattr(context.ReportContext, "learned_runs", _every_run)
    for chooser in (choosing(1.0), choosing(-1.0)):
        calls.clear()
        monkeypatch.setattr(rates, "choose", chooser)
        monkeypatch.setattr(context, "_MEMO", {})
        _, _, claims = build.build_report(out)
        assert calls == []
        assert not [c.id for c in claims if c.verdict == ERROR]
        md = (out / "report.md").read_text()
        assert "neither readable weights" not in md
        # 12 runs, all finished: the 4 at the rate their arm did not keep are neither unfinished nor failed
        assert "12 runs (12 done, 4 of them at a learning rate their arm did not keep" in " ".join(md.split())
    assert picked[0] != picked[-1]  # the reversed choice read other rates' runs


def test_the_measuring_code_covers_every_module_a_measure_runs(study_dir: Path) -> None:
    """A kept measure counts only under the code that took it (``measuring_code``): every pelab module that
    measuring a stored model runs (each measure taken in a fresh process, one at init as C8 takes it) is in
    ``MEASURING_CODE``, but for the plumbing that computes nothing; a plugin loaded changes it."""
    import subprocess
    import sys

    from pelab import plugins
    from pelab.report import context

    run = sorted(p.stem for p in (study_dir / "checkpoints").glob("*.safetensors"))[0]
    probe = (
        "import sys\nfrom pelab.report.context import measure_job\nfrom pelab.analysis.measures import MEASURES\n"
        f"for name in MEASURES:\n    measure_job({str(study_dir)!r}, name, {run!r}, name == 'layer_probes')\n"
        "print(' '.join(m for m in sys.modules if m[:6] == 'pelab.'))"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.split()
    plumbing = {"errors", "files", "interrupts", "forkserver", "plugins", "records", "report", "study"}  # no numbers
    root = Path(context.__file__).parents[1]
    covered = {Path(e).with_suffix("").as_posix() for e in context.MEASURING_CODE}
    for e in context.MEASURING_CODE:
        assert (root / e).exists(), e
    left = [m for m in out if m.split(".")[1] not in covered | plumbing]
    assert "pelab.analysis.probes" in out and left == []
    before = context.measuring_code()
    assert before == context.measuring_code() and len(before) == 64
    plugins._LOADED["x"] = plugins._LOADED.get("x") or type("P", (), {"name": "x", "sha256": "0" * 64})()
    try:
        assert context.measuring_code() != before
    finally:
        plugins._LOADED.pop("x", None)
    assert context.measuring_code() == before


def test_a_folder_whose_weights_are_gone_decides_from_its_kept_measures(
    study_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder that kept its measures but not its weights (here the database alone, published as
    docs/make_results.py publishes full's run and unpacked into a new folder; or checkpoints deleted to save space)
    decides every claim as it did with them, byte for byte in claims.json, and says which figures of one run's
    weights it could not draw. A measure it never kept is one line naming the run, never a wrong verdict; a folder
    with neither weights nor measures is unmeasured, as ``--no-checkpoints`` always was."""
    import sqlite3

    from pelab.errors import PelabError
    from pelab.report import build, context

    calls: list[tuple[str, str, bool]] = []
    job = context.measure_job

    def counted(folder: str, name: str, run_id: str, at_init: bool) -> dict:
        calls.append((name, run_id, at_init))
        return job(folder, name, run_id, at_init)

    monkeypatch.setattr(context.ReportContext, "learned_runs", _every_run)
    monkeypatch.setattr(context, "measure_job", counted)
    monkeypatch.setattr(build, "report_pool", lambda: contextlib.nullcontext(None))  # measures run here, counted
    copy = tmp_path / "travelled"
    shutil.copytree(study_dir, copy)
    monkeypatch.setattr(context, "_MEMO", {})
    build.build_report(copy)  # with the weights: measures, and keeps them
    first = (copy / "claims.json").read_text()
    assert calls
    measured = {r for _, r, _ in calls}
    published, copy = tmp_path / "published", tmp_path / "unpacked"  # as docs/make_results.py publishes full's run
    published.mkdir()
    copy.mkdir()
    _maker().publish_database(tmp_path / "travelled", published)
    (copy / "results.sqlite").write_bytes(gzip.decompress((published / "results.sqlite.gz").read_bytes()))
    for name in ("protocol.json", "sequential.json"):
        if (published / name).exists():
            shutil.copyfile(published / name, copy / name)
    calls.clear()
    monkeypatch.setattr(context, "_MEMO", {})
    build.build_report(copy)
    assert calls == []
    before, after = json.loads(first), json.loads((copy / "claims.json").read_text())
    for c in before + after:  # C11 lists the runs whose trained tables it shows: an analysis of weights, not kept
        if c["id"] == "C11":
            c["runs"] = []
    assert after == before
    md = (copy / "report.md").read_text()
    assert "weights gone, measures read from the database, figures not drawn:" in md

    with sqlite3.connect(copy / "results.sqlite") as db:
        run, key = db.execute("SELECT run_id, key FROM measures ORDER BY run_id, key").fetchone()
        db.execute("DELETE FROM measures WHERE run_id = ? AND key = ?", (run, key))
    monkeypatch.setattr(context, "_MEMO", {})
    with pytest.raises(PelabError, match=f"run {run}'s weights are gone and its '{json.loads(key)[1]}'"):
        build.build_report(copy)
    assert calls == []

    with sqlite3.connect(copy / "results.sqlite") as db:
        db.execute("DELETE FROM measures")
    ctx = build.load_context(copy)
    assert measured and not any(ctx.measurable(r) for r in measured)
    ctx.floor = 0.0  # every arm "learned": its runs are left out, and counted for the report's header
    monkeypatch.undo()
    arm = ctx.frame[ctx.frame.run_id.isin(measured)]
    assert context.ReportContext.learned_runs(ctx, arm) == [] and ctx.unmeasurable == set(arm.run_id)


def _forget_measures(folder: Path) -> None:
    """Drop the measures the fixture's report kept, so a report on this copy takes them again."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(folder / "results.sqlite")) as db, db:
        db.execute("DELETE FROM measures")


def test_measures_on_worker_processes_match_one_process(
    study_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's per-seed measures run on worker processes; in this process alone they give the same
    verdicts, key figures and comparison rows."""
    import functools

    from pelab.report import build
    from pelab.report.context import report_pool

    copy = tmp_path / "one"
    shutil.copytree(study_dir, copy)
    _forget_measures(copy)  # measured again here, in this process alone
    monkeypatch.setattr(build, "report_pool", functools.partial(report_pool, 1))
    build.build_report(copy)
    pooled = json.loads((study_dir / "claims.json").read_text())
    alone = json.loads((copy / "claims.json").read_text())
    assert [(c["id"], c["verdict"], c["key"]) for c in alone] == [(c["id"], c["verdict"], c["key"]) for c in pooled]
    assert json.dumps([c["rows"] for c in alone], sort_keys=True) == json.dumps(
        [c["rows"] for c in pooled], sort_keys=True
    )


def test_every_measure_the_plans_start_is_read_by_its_claim(
    study_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claims' plans start their measures on the workers before any claim runs. A plan that started a measure
    no claim reads would only waste a worker; one that missed a measure would leave it to be waited for later.
    Both are checked: the measures the claims read are exactly the ones the plans started, and none is left."""
    import functools

    from pelab.report import build
    from pelab.report.context import ReportContext, report_pool

    copy = tmp_path / "planned"
    shutil.copytree(study_dir, copy)
    _forget_measures(copy)  # nothing read from the database: every measure is started or taken
    planned: list[str] = []
    after: list[tuple[set[str], dict]] = []
    submit, run_claims = ReportContext.submit, build._run_claims

    def record(self: ReportContext, name: str, run_ids: list[str], at_init: bool = False) -> None:
        before = set(self.started)
        submit(self, name, run_ids, at_init)
        planned.extend(set(self.started) - before)

    def claims_then_look(ctx: ReportContext, specs: list) -> list:
        planned_by_plans = list(planned)
        out = run_claims(ctx, specs)
        read = {k for k in ctx.analyses if k.startswith('["measure"')}
        after.append((read - set(planned_by_plans), dict(ctx.started)))
        return out

    def every_run(self: ReportContext, arm: pd.DataFrame) -> list[str]:
        """The tiny study learns nothing in 25 steps: read every finished run as learned, so there is a lot
        to measure (plans and claims read this alike)."""
        done = arm[arm.status == "done"].sort_values("seed")
        return [str(r) for r in done.run_id if self.has_checkpoint(str(r))]

    monkeypatch.setattr(build, "report_pool", functools.partial(report_pool, 2))
    monkeypatch.setattr(ReportContext, "learned_runs", every_run)
    monkeypatch.setattr(ReportContext, "submit", record)
    monkeypatch.setattr(build, "_run_claims", claims_then_look)
    build.build_report(copy)
    assert planned, "the plans started no measure"
    assert len(planned) == len(set(planned))
    ((unplanned, unread),) = after
    assert unplanned == set() and unread == {}


def test_the_report_tells_its_progress_to_the_end_and_a_log_file_gets_lines(
    study_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report took a minute behind a spinner. Now every measure of a stored model (on the workers, told from the
    pool's thread), every claim and the writing is counted as it ends: the counts only grow, every item known is
    finished by the end, and ``pelab report`` into a file prints plain progress lines that end at 100%."""
    from typer.testing import CliRunner

    from pelab.cli import app
    from pelab.report import build
    from pelab.report.context import ReportContext

    def every_run(self: ReportContext, arm: pd.DataFrame) -> list[str]:
        done = arm[arm.status == "done"].sort_values("seed")  # the tiny study learned nothing: measure every run
        return [str(r) for r in done.run_id if self.has_checkpoint(str(r))]

    monkeypatch.setattr(ReportContext, "learned_runs", every_run)
    copy = tmp_path / "told"
    shutil.copytree(study_dir, copy)
    _forget_measures(copy)  # the measures are counted as they are taken, not read
    told: list[tuple[int, int, str]] = []
    build.build_report(copy, on_progress=lambda done, known, left: told.append((done, known, left)))
    dones = [d for d, _, _ in told]
    assert dones == sorted(dones) and all(d <= k for d, k, _ in told)
    assert told[-1][0] == told[-1][1] == max(k for _, k, _ in told)
    assert told[-1][1] > 25  # the claims, the writing and the stored models' measures, not the claims alone
    assert any(left.startswith("about ") for _, _, left in told)
    result = CliRunner().invoke(app, ["report", str(copy)])
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("report: ")]
    done = next(i for i, ln in enumerate(lines) if ln.startswith("report: done in "))
    assert re.fullmatch(r"report: (\d+)/\1 \(100%\), \d+:\d\d elapsed", lines[done - 1]), lines
    assert done >= 3 and "about " in " ".join(lines[:done]), lines


def test_a_prefetched_analysis_that_failed_raises_at_every_read() -> None:
    """A job on the report's pool that fails must not read as "nothing to say" (C16 would say MiniLM is not
    installed): its error comes back at every read, and a job that worked is read once and kept."""
    from concurrent.futures import ThreadPoolExecutor

    from pelab.report.context import ReportContext

    def broken() -> None:
        raise RuntimeError("worker died")

    with ThreadPoolExecutor(1) as pool:
        ctx = ReportContext(folder=Path("."), study=None, rows=[], frame=None, pool=pool)  # type: ignore[arg-type]
        ctx.prefetch("broken", broken)
        ctx.prefetch("fine", lambda x: {"x": x}, 3)
        for _ in range(2):
            with pytest.raises(RuntimeError, match="worker died"):
                ctx.prefetched("broken")
        assert ctx.prefetched("fine") == {"x": 3} and ctx.prefetched("fine") == {"x": 3}
        assert ctx.prefetched("never started") is None


def test_a_claim_is_declared_on_its_own_function() -> None:
    """``@claim("C8", ...)`` registers the function right under it: a helper written between the declaration and
    ``c8`` would be registered in its place and fail only when a report runs (it did: C8 read "error")."""
    from pelab.report.registry import claim

    def helper(task: str) -> str:
        return task

    with pytest.raises(ValueError, match=r"claim C99 declared on helper\(\), not on c99\(\)"):
        claim("C99", "t", "c", "s", "r")(helper)
