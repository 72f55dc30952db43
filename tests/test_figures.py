"""Report figures and the report's verdict badges: what a reader takes in at a glance.

Figures are checked through their pure helpers (order, clipping, styles) and through the
matplotlib figure itself, caught before it is saved. The templates are rendered from
hand-made claims, so the badges, the "What this run says" section, the rule's link and
the folded run lists are pinned without training anything.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib.pyplot as plt
import pytest

from pelab.report import figures
from pelab.report.build import VERDICT_CLASS, VERDICT_GLYPH, template_env, verdict_split
from pelab.report.evidence import ArmStats
from pelab.report.registry import ClaimResult, Table
from pelab.rules import EXACT, INCONCLUSIVE, NO_INFO, NOT_SUPPORTED, SUPPORTED, TOO_SMALL, VERDICTS


def arm(label: str, mean: float, half: float = 0.1, seeds: int = 3) -> ArmStats:
    return ArmStats(label, mean, mean - half, mean + half, seeds, params=1000, flops=10)


@pytest.fixture
def caught(monkeypatch: pytest.MonkeyPatch) -> list[plt.Figure]:
    """The figures the plotting functions would have saved, drawn but still open."""
    out: list[plt.Figure] = []

    def keep(fig: plt.Figure, path: Path, tight: bool = True) -> Path:
        fig.canvas.draw()
        out.append(fig)
        return Path(path)

    monkeypatch.setattr(figures, "save", keep)
    yield out
    for fig in out:
        plt.close(fig)


# --- arms ---------------------------------------------------------------------------
def test_arm_order_puts_the_best_first_and_drops_empty_arms() -> None:
    arms = [arm("a", 0.5), arm("b", 0.9), arm("none", math.nan, seeds=0), arm("c", 0.7), arm("nan", math.nan)]
    assert [a.label for a in figures.arm_order(arms)] == ["b", "c", "a", "nan"]
    assert [a.label for a in figures.arm_order(arms, higher_is_better=False)] == ["a", "c", "b", "nan"]


def test_clip_interval_stays_inside_the_bounds() -> None:
    for lo, hi in [(-0.3, 0.5), (0.2, 1.4), (-1.0, 2.0), (0.1, 0.9), (1.2, 1.5), (-0.5, -0.1)]:
        c_lo, c_hi = figures.clip_interval(lo, hi, (0.0, 1.0))
        assert 0.0 <= c_lo <= c_hi <= 1.0
        if 0.0 <= lo <= hi <= 1.0:
            assert (c_lo, c_hi) == (lo, hi)
    assert figures.clip_interval(-3.0, 7.0, None) == (-3.0, 7.0)  # loss: unbounded
    lo, hi = figures.clip_interval(math.nan, math.nan, (0.0, 1.0))
    assert math.isnan(lo) and math.isnan(hi)


def test_arms_plot_draws_best_on_top_marks_the_floor_and_clips(caught: list[plt.Figure], tmp_path: Path) -> None:
    arms = [arm("low", 0.3, half=0.5), arm("top", 0.97, half=0.2), arm("mid", 0.85, half=0.3)]
    figures.arms_plot(tmp_path / "a.png", arms, "t", chance=0.125, floor=0.8)
    (ax,) = caught[0].axes
    # Tick i sits at y=i and the y axis runs downwards, so the first label is the top row.
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert [lab.split()[0] for lab in labels] == ["top", "mid", "low"]
    assert ax.get_ylim()[0] > ax.get_ylim()[1]
    assert "below floor" in labels[2] and "below floor" not in labels[0] + labels[1]
    assert {"floor", "chance"} <= {t.get_text().strip() for t in ax.texts}
    xs = [x for coll in ax.collections for seg in coll.get_segments() for x, _ in seg]
    assert xs and min(xs) >= 0.0 and max(xs) <= 1.0


def test_arms_plot_keeps_the_old_call(tmp_path: Path) -> None:
    path = figures.arms_plot(tmp_path / "b.png", [arm("x", 1.2, 0.5)], "loss", "loss", None, bounds=None)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- curves -------------------------------------------------------------------------
SCHEMES = ["sinusoidal", "learned", "rotary", "alibi", "t5", "none", "untied"]


def curve(rate: float) -> list[list[dict[str, float]]]:
    return [[{"step": s, "loss": 2.5 * math.exp(-s / rate) + 0.05} for s in range(1, 41)]]


def test_series_styles_are_unique_past_the_ten_colours() -> None:
    labels = [f"scheme{i} + add" for i in range(25)]
    styles = figures.series_styles(labels)
    assert len(set(styles.values())) == 25
    assert styles["scheme0 + add"][1:] == styles["scheme9 + add"][1:] == ("-", "")  # ten solid colours first


def test_curves_plot_with_20_series_draws_20_distinct_lines(caught: list[plt.Figure], tmp_path: Path) -> None:
    labels = [f"{s} + {c}, d={d}" for s in SCHEMES[:5] for c in ("add", "concat_split") for d in (16, 8)]
    curves = {label: curve(10 + i) for i, label in enumerate(labels)}
    figures.curves_plot(tmp_path / "c.png", curves, "t")
    fig = caught[0]
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert len(lines) == 20
    # Sorted, numbers as numbers, so one scheme's lines sit together in the legend, d=8 before d=16.
    assert [ln.get_label() for ln in lines] == sorted(labels, key=lambda s: (s.split(",")[0], int(s.split("d=")[1])))
    looks = {(str(ln.get_color()), ln.get_linestyle(), str(ln.get_marker())) for ln in lines}
    assert len(looks) == 20
    # The legend sits beside the plot, not over the curves.
    (legend,) = fig.legends
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1


# --- verdict badges and the templates -----------------------------------------------
def test_every_verdict_has_its_own_class_and_glyph() -> None:
    assert set(VERDICT_CLASS) == set(VERDICTS) == set(VERDICT_GLYPH)
    assert len(set(VERDICT_CLASS.values())) == len(VERDICTS)
    assert len(set(VERDICT_GLYPH.values())) == len(VERDICTS)
    css = (Path(figures.__file__).parent / "templates" / "report.html.j2").read_text()
    for cls in VERDICT_CLASS.values():
        assert f".{cls} {{" in css, cls


def test_verdict_split() -> None:
    assert verdict_split(SUPPORTED) == (SUPPORTED, "")
    assert verdict_split("not supported (0 of 2)") == ("not supported", " (0 of 2)")
    assert verdict_split(f"{TOO_SMALL}; d=8") == (TOO_SMALL, "; d=8")
    assert verdict_split("exactly so") == (None, "exactly so")
    assert verdict_split("–") == (None, "–")


def claim(**kw: Any) -> SimpleNamespace:
    """A ClaimResult's fields, plus whatever extra attributes the template may read."""
    base = ClaimResult(id="C1", title="t", claim="c", source="s", rule="r")
    return SimpleNamespace(**{**vars(base), **kw})


def render(tmp_path: Path, claims: list[SimpleNamespace], **extra: Any) -> tuple[str, str]:
    env = template_env(tmp_path)
    data = (
        dict(
            study=SimpleNamespace(name="s", description=""),
            claims=claims,
            curves=[],
            runs=2,
            done=2,
            failed=0,
            seeds="seeds 0, 1 (2 paired seeds per arm)",
            floor=0.8,
            margin=0.01,
            axes=["model.combine"],
            held=["task"],
            command="pelab study s.toml",
            machine={"pelab": "0"},
            study_seconds="1",
            report_seconds="1",
            source="",
            Table=Table,
        )
        | extra
    )  # what a test passes replaces the default
    return env.get_template("report.html.j2").render(**data), env.get_template("report.md.j2").render(**data)


def test_templates_badge_every_verdict_and_fold_run_ids(tmp_path: Path) -> None:
    ids = [f"{i:016x}" for i in range(80)]
    table = Table("arms", ["arm", "verdict"], [["a", SUPPORTED], ["b", f"{TOO_SMALL}; d=8"], ["c", "–"]])
    claims = [claim(id=f"C{i + 1}", verdict=v) for i, v in enumerate(VERDICTS)]
    claims[0] = claim(id="C1", verdict=EXACT, run_ids=ids, tables=[table], doc="docs/claims.md#c1", metric="loss")
    html, md = render(tmp_path, claims)
    for v in VERDICTS:
        assert f'<span class="verdict {VERDICT_CLASS[v]}"><span class="glyph" aria-hidden="true">' in html
        assert f"{VERDICT_GLYPH[v]} **{v}**" in md
    # The verdict column is badged, extra text kept; other cells are not.
    assert re.search(r'<td data-label="verdict"><span class="verdict v-too-small">.*?</span>; d=8</td>', html)
    assert '<td data-label="verdict">–</td>' in html
    assert f"{VERDICT_GLYPH[TOO_SMALL]} **{TOO_SMALL}**; d=8" in md
    # Rule explained and the deciding metric; nothing when absent.
    assert 'href="docs/claims.md#c1">rule explained</a>' in html and "deciding metric: loss" in html
    assert "[rule explained](docs/claims.md#c1)" in md and "deciding metric: loss" in md
    assert html.count("rule explained") == 1
    # 80 run ids folded into one <details>, in both formats.
    assert '<details class="runs"><summary>80 runs</summary>' in html and ", ".join(ids) in html
    assert "<details><summary>80 runs</summary>" in md and ", ".join(ids) in md
    assert "What this run says" not in html + md  # no answer passed: no empty section


def test_what_this_run_says_comes_first(tmp_path: Path) -> None:
    """The first screen: the sentences, each ending in a link to its claim, then the scale; the list of every claim
    (a badge and a link each, no key figures) after it."""
    sentences = [
        {"id": "C6", "verdict": INCONCLUSIVE, "text": "At the same width, concatenating beat adding on 0 of 3",
         "details": ["Undecided: they differ by at most 3.1 pp accuracy", "No verdict on 1 more: an arm below",
                     "Masked ones: not run; `pelab study --preset full` runs it <b>"]},
        {"id": "C9", "verdict": NO_INFO, "text": "On frozen vectors, both arms sat at the ceiling on 2", "details": []},
    ]  # fmt: skip
    claims = [claim(id="C6", verdict=INCONCLUSIVE), claim(id="C9", verdict=NO_INFO)]
    html, md = render(tmp_path, claims, sentences=sentences, scale="~3k parameters, 25k tokens per run, seeds 0, 1")
    assert html.index("What this run says") < html.index('id="summary"')
    assert md.index("What this run says") < md.index("## Every claim")
    sentence = "At the same width, concatenating beat adding on 0 of 3"
    assert f'<p class="sentence">{sentence} (<a href="#c6">C6</a>).</p>' in html
    assert "**At the same width, concatenating beat adding on 0 of 3** ([C6](#c6))." in md
    # its numbers under it, a short list each; none under a sentence without details
    assert '<ul class="details"><li>Undecided: they differ by at most 3.1 pp accuracy.</li><li>No verdict' in html
    assert html.count('<ul class="details">') == 1
    # a command in backticks is code in HTML (the markdown keeps its backticks), and the rest stays escaped
    assert "<li>Masked ones: not run; <code>pelab study --preset full</code> runs it &lt;b&gt;.</li>" in html
    assert "- Masked ones: not run; `pelab study --preset full` runs it" in md
    assert "([C6](#c6)).\n- Undecided: they differ by at most 3.1 pp accuracy.\n- No verdict on 1 more" in md
    assert html.index("on 0 of 3") < html.index("~3k parameters") < html.index('id="summary"')
    assert "~3k parameters, 25k tokens per run" in md
    assert f"- {VERDICT_GLYPH[NO_INFO]} **{NO_INFO}** · [C9](#c9) t" in md
    listed = md[md.index("## Every claim") :].split("\n## ")[0]
    assert [ln[:3] for ln in listed.splitlines() if ln.startswith("- ")] == [
        "- " + VERDICT_GLYPH[INCONCLUSIVE],
        "- " + VERDICT_GLYPH[NO_INFO],
    ]  # one a line
    # a claim of two halves says which holds in the list (full's C4: "not supported", though its first half held)
    halves = {"cross terms carry ≥ 10%": "supported", "removing them costs": "not supported"}
    html, md = render(tmp_path, [claim(id="C4", verdict=NOT_SUPPORTED, halves=halves)], sentences=sentences, scale="")
    assert "(cross terms carry ≥ 10%: supported; removing them costs: not supported)" in md
    assert "(cross terms carry ≥ 10%: supported; removing them costs: not supported)</span>" in html.replace(
        "&ge;", "≥"
    )


# --- figures from the folder: embedded only as whole, sane PNGs (a cache folder is untrusted input) ---------------
def _chunk(kind: bytes, body: bytes) -> bytes:
    import struct
    import zlib

    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png(width: int, height: int) -> bytes:
    """A PNG's signature, header and end, with no pixels: enough to be read as what it claims to be."""
    import struct

    from pelab.report.render import PNG_MAGIC

    return PNG_MAGIC + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + _chunk(b"IEND", b"")


def test_a_figure_is_embedded_only_as_a_whole_png_of_sane_size(tmp_path: Path) -> None:
    """A real figure is embedded; a fake one (the signature and 20 MB of nothing, a damaged or truncated PNG, one
    claiming 100,000 x 100,000 pixels) is left out with the reason, never embedded whole, never an error."""
    from pelab.report.render import MAX_FIGURE_BYTES, PNG_MAGIC, figure

    real = tmp_path / "real.png"
    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
    ax.plot([0, 1], [1, 0])
    fig.savefig(real)
    plt.close(fig)
    data = real.read_bytes()
    assert figure(real).uri.startswith("data:image/png;base64,") and figure(real).why == ""

    huge = tmp_path / "positions_pca.png"
    huge.write_bytes(PNG_MAGIC)
    os.truncate(huge, 20 * 2**20)  # sparse: no 20 MB written
    assert huge.stat().st_size > MAX_FIGURE_BYTES
    cases = {
        huge: "20 MB, more than the 8 MB",
        tmp_path / "garbage.png": "damaged",
        tmp_path / "truncated.png": "truncated",
        tmp_path / "trailing.png": "data after its end",
        tmp_path / "bad-crc.png": "CRC",
        tmp_path / "vast.png": "100000 x 100000 pixels",
        tmp_path / "text.png": "not a PNG",
        tmp_path / "missing.png": "missing",
    }
    (tmp_path / "garbage.png").write_bytes(PNG_MAGIC + b"\0" * 100)
    (tmp_path / "truncated.png").write_bytes(data[: len(data) // 2])
    (tmp_path / "trailing.png").write_bytes(data + b"<script>")
    (tmp_path / "bad-crc.png").write_bytes(data[:40] + bytes([data[40] ^ 1]) + data[41:])
    (tmp_path / "vast.png").write_bytes(_png(100_000, 100_000))
    (tmp_path / "text.png").write_text("password")
    for path, why in cases.items():
        assert figure(path).uri == "", path.name
        assert why in figure(path).why, (path.name, figure(path).why)
    assert figure(tmp_path / "ok.png").why == "missing"
    (tmp_path / "ok.png").write_bytes(_png(880, 4149))  # as tall as a full study's tallest forest plot
    assert figure(tmp_path / "ok.png").why == ""


def test_a_figure_left_out_is_a_visible_line_in_both_reports(tmp_path: Path) -> None:
    from pelab.report.registry import Figure
    from pelab.report.render import PNG_MAGIC

    huge = tmp_path / "analyses" / "pretrained" / "positions_pca.png"
    huge.parent.mkdir(parents=True)
    huge.write_bytes(PNG_MAGIC)
    os.truncate(huge, 20 * 2**20)
    html, md = render(tmp_path, [claim(verdict=EXACT, figures=[Figure("MiniLM positions", huge)])])
    assert "data:image/png" not in html and len(html) < 2**20
    line = "Figure left out, analyses/pretrained/positions_pca.png: 20 MB, more than the 8 MB a figure may weigh"
    assert f'<p class="left-out">{line} (MiniLM positions).</p>' in html
    assert f"*{line} (MiniLM positions).*" in md and "](analyses/pretrained/positions_pca.png)" not in md


def test_every_printed_value_shows_escape_codes_as_text(tmp_path: Path) -> None:
    """Not only the name: a table's cell, a note, a caveat, a machine's field, the study file, as both templates
    print them, hold no raw ESC or BEL (the environment's finalize); a caveat keeps its lines and a badge its HTML."""
    esc = "x\x1b]0;T\x07y"
    table = Table("arms", ["arm", "verdict"], [[esc, SUPPORTED]])
    c = claim(verdict=SUPPORTED, tables=[table], caveats=[f"{esc}\nsecond line"], notes=[esc], source=esc, key=esc)
    html, md = render(tmp_path, [c], study=SimpleNamespace(name=esc, description=esc), machine={"pelab": esc})
    for page in (html, md):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", page)
        assert "x\\x1b]0;T\\x07y" in page
    assert "<title>pelab report: x\\x1b]0;T\\x07y</title>" in html
    assert "<li>x\\x1b]0;T\\x07y\nsecond line</li>" in html
    assert f'<span class="verdict {VERDICT_CLASS[SUPPORTED]}">' in html
