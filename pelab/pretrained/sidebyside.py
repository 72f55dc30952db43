"""`pelab pretrained --model PATH ...`: several models measured, drawn and written down side by side.

``run`` loads nothing itself (the command loads every model first, so a bad folder fails before any
work), measures each model and a closed-form table of each size (``compare.side_by_side``), draws
``compare_figures``, and writes ``pretrained.json`` (the numbers under ``side_by_side``, beside
MiniLM's own when it was one of the models) and ``pretrained.md`` (MiniLM's sections, then "Side by
side": one table for sequence models, one for patch grids, and what was read from each folder).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.markup import escape

from pelab.analysis.inputs import jsonable
from pelab.errors import visible
from pelab.files import read_json_cache, write_atomic
from pelab.pretrained import compare
from pelab.pretrained import positions as pa
from pelab.pretrained.report import JSON_NAME, _f, markdown_sections, one_thread
from pelab.weights.hf import BUILTIN, Model


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _first(rows: list[dict], field: str) -> float | None:
    return rows[0][field] if rows else None


def table_kind(n: dict) -> str:
    c = n["closed_form"]
    if c["matches"]:
        return f"fixed: {c['name']} (max error {c['max_abs_error']:.0e})"
    return "learned" + (
        f" (config says {c['config']}, but it is {_f(c['max_abs_error'], 2)} off)" if c["config"] else ""
    )


def markdown_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines; none when there are no rows."""
    if not rows:
        return []
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def sequence_table(numbers: dict) -> tuple[list[str], list[list[str]]]:
    """The side-by-side table of sequence models as headers and rows of cells, each model followed by the
    sinusoid of its size (once per size); no rows when no model is a sequence model."""
    r = pa.LINEARITY_RANK
    headers = [
        "model", "positions x width (first row)", "table", "R² of position", "MAE (chance)", "R² shuffled",
        "order accuracy (shuffled)", "C11 k=1, full width (shuffled)", f"C11 k=1, top {r} directions (shuffled)",
        "mean norm word / position / token type", "position variance in the word subspace, top r (random)",
    ]  # fmt: skip
    rows: list[list[str]] = []
    done = set()
    for name, n in numbers["models"].items():
        if "positions" not in n:
            continue
        for label, t, src in ((name, n, n["source"]), (n["reference"], numbers["references"][n["reference"]], None)):
            if src is None and label in done:
                continue
            done.add(label)
            p, lin = t["positions"], t["linearity"]
            reg, order = p["regression"]["all"], p["relative_order"]
            full = (
                f"{_f(_first(lin, 'residual'))} ({_f(_first(lin, 'shuffled_residual'))})"
                if lin and lin[0]["residual"] is not None
                else "undetermined (L - k <= D)"
            )
            top = f"{_f(_first(lin, 'rank_residual'))} ({_f(_first(lin, 'rank_shuffled_residual'))})"
            L, D = p["shape"]
            if src is None:
                shape, kind, norms, sub = (
                    f"{L} x {D}",
                    "closed form",
                    "– / " + _f(t["norms"]["position"]["mean"], 2) + " / –",
                    "–",
                )
            else:
                shape, kind = f"{L} x {D} (row {src['offset']})", table_kind(n)
                nm = n["norms"]
                norms = " / ".join(_f(nm[k]["mean"], 2) if k in nm else "–" for k in ("word", "position", "token_type"))
                by = n["subspace"]["by_rank"]
                top_r = max(by, key=int)
                sub = f"r={top_r}: {_f(by[top_r]['position_variance_in_word'])} ({_f(by[top_r]['random_baseline'])})"
            rows.append([
                label, shape, kind, _f(reg["r2"]), f"{_f(reg['mae'], 1)} ({_f(reg['mae_chance'], 1)})",
                _f(p["regression_shuffled"]["r2"]),
                f"{_f(order['accuracy'])} ({_f(p['relative_order_shuffled']['accuracy'])})", full, top, norms, sub,
            ])  # fmt: skip
    return headers, rows


def sequence_rows(numbers: dict) -> list[str]:
    """The side-by-side table of sequence models, in Markdown (see ``sequence_table``)."""
    return markdown_table(*sequence_table(numbers))


def grid_table(numbers: dict) -> tuple[list[str], list[list[str]]]:
    """The side-by-side table of patch grids as headers and rows of cells, each model followed by the 2-D
    sin-cos table of its grid; no rows when no model reads patches."""
    r = pa.LINEARITY_RANK
    headers = [
        "model", "grid x width", "table", "R² of row / column (shuffled)", "left-right / above-below order (shuffled)",
        f"C11, 1 patch right / down, top {r} directions (shuffled)", "similarity of neighbours right / down",
        "mean norm position / [CLS] position / [CLS] token",
    ]  # fmt: skip
    rows: list[list[str]] = []
    done = set()
    for name, n in numbers["models"].items():
        if "probes" not in n:
            continue
        for label, t, is_model in ((name, n, True), (n["reference"], numbers["references"][n["reference"]], False)):
            if t is None or (not is_model and label in done):
                continue
            done.add(label)
            pr, lin, sim = t["probes"], t["linearity"], t["similarity_by_offset"]
            H, W, D = t["shape"]
            c11 = " / ".join(
                f"{_f(_first(lin[a], 'rank_residual'))} ({_f(_first(lin[a], 'rank_shuffled_residual'))})"
                for a in ("columns", "rows")
            )
            nm = t["norms"]
            norms = " / ".join(
                _f(nm[k]["mean"], 2) if k in nm else "–" for k in ("position", "cls_position", "cls_token")
            )
            rows.append([
                label, f"{H} x {W} x {D}", table_kind(n) if is_model else "closed form",
                f"{_f(pr['row']['r2'])} / {_f(pr['column']['r2'])} ({_f(pr['row_shuffled']['r2'])} / "
                f"{_f(pr['column_shuffled']['r2'])})",
                f"{_f(pr['left_right']['accuracy'])} / {_f(pr['above_below']['accuracy'])} "
                f"({_f(pr['left_right_shuffled']['accuracy'])} / {_f(pr['above_below_shuffled']['accuracy'])})",
                c11, f"{_f(sim.get('c+1'))} / {_f(sim.get('r+1'))}", norms,
            ])  # fmt: skip
    return headers, rows


def grid_rows(numbers: dict) -> list[str]:
    """The side-by-side table of patch grids, in Markdown (see ``grid_table``)."""
    return markdown_table(*grid_table(numbers))


def sources_table(numbers: dict) -> tuple[list[str], list[list[str]]]:
    """What was read from each folder, as headers and rows of cells."""
    headers = ["model", "family", "folder", "tensors", "stored position table", "position 0 at row"]
    rows = []
    for name, n in numbers["models"].items():
        s = n["source"]
        rows.append([
            name, s["model_type"], str(s["path"]), ", ".join(f"{role} {key}" for role, key in s["tensors"].items()),
            " x ".join(map(str, s["table_shape"])), str(s["offset"]),
        ])  # fmt: skip
    return headers, rows


def model_notes(numbers: dict) -> list[str]:
    """What was read from each folder, and its C11 rows."""
    out = []
    for name, n in numbers["models"].items():
        s = n["source"]
        tensors = ", ".join(f"{role} `{key}`" for role, key in s["tensors"].items())
        out.append(
            f"- **{name}** ({s['model_type']}, `{s['path']}`): {tensors}; stored position table "
            f"{' x '.join(map(str, s['table_shape']))}, position 0 at row {s['offset']}"
            + (
                f"; {s['word_rows_analysed']} word rows analysed"
                + (" (special and unused tokens left out)" if s.get("word_rows_filtered") else " (no vocabulary: all)")
                if s["word_rows_analysed"]
                else ""
            )
            + "."
        )
        lins = {"": n["linearity"]} if isinstance(n["linearity"], list) else n["linearity"]
        for axis, rows in lins.items():
            cells = [
                f"k={r['k']}: {_f(r['residual']) if r['residual'] is not None else '–'} / "
                f"{_f(r['rank_residual'])} (shuffled {_f(r['rank_shuffled_residual'])})"
                for r in rows
            ]
            if cells:
                what = f" along {axis}" if axis else ""
                out.append(
                    f"  C11{what}, residual full width / top {pa.LINEARITY_RANK} directions: " + "; ".join(cells)
                )
        if "subspace" in n:
            e = n["subspace"]["energy"]
            other = "word" if "word" in n["norms"] else "patch projection"
            out.append(
                f"  Subspaces holding 90% of the variance ({e['dims'][0]} {other} and {e['dims'][1]} position "
                f"directions): overlap {_f(e['overlap'], 4)} (random {_f(e['random_baseline'], 4)})."
            )
        if "token_type" in n:
            t = n["token_type"]
            out.append(
                f"  Token-type vectors: {_pct(t['share_in_word'])} of their energy in the word table's top "
                f"{t['rank']} directions, {_pct(t['share_in_position'])} in the position table's (random "
                f"{_pct(t['random_baseline'])}); the two types differ by {_f(t['difference_norm'], 3)}."
            )
    return out


def markdown(numbers: dict) -> str:
    seq, grid = sequence_rows(numbers), grid_rows(numbers)
    parts = [
        "Each model's position table as the model reads it (position 0 first), beside a closed-form table of the "
        "same size: the sinusoid (paper layout) for sequences, MAE's 2-D sin-cos for patch grids. C16: ridge "
        "regression of the position (a patch's row and column) on held-out positions, logistic regression of the "
        "order of two unseen positions; C11: the relative residual of the best linear map PE(pos) -> PE(pos+k), "
        "over the whole width only when there are more pairs than width, and inside the top "
        f"{pa.LINEARITY_RANK} directions; each beside the same table with its rows shuffled.",
        "",
    ]
    if seq:
        parts += [
            "### Sequence models",
            "",
            *seq,
            "",
            "Figures: compare_pca.png, compare_similarity.png, compare_probes.png.",
            "",
        ]
    if grid:
        parts += ["### Patch grids", "", *grid, "", "Figure: compare_patches.png.", ""]
    parts += ["### What was read", "", *model_notes(numbers)]
    return "\n".join(parts)


def summary_lines(numbers: dict) -> list[str]:
    """One console line per model."""
    out = []
    for name, n in numbers["models"].items():
        if "positions" in n:
            p, lin = n["positions"], n["linearity"]
            reg = p["regression"]["all"]
            L, D = p["shape"]
            out.append(
                f"{name}: {L} x {D} {table_kind(n)}; position R² {_f(reg['r2'])} (MAE {_f(reg['mae'], 1)}, chance "
                f"{_f(reg['mae_chance'], 1)}); order {_pct(p['relative_order']['accuracy'])}; C11 k=1 in the top "
                f"{pa.LINEARITY_RANK} directions {_f(_first(lin, 'rank_residual'))} (shuffled "
                f"{_f(_first(lin, 'rank_shuffled_residual'))})"
            )
        else:
            pr, lin = n["probes"], n["linearity"]
            H, W, D = n["shape"]
            out.append(
                f"{name}: {H} x {W} patches x {D} {table_kind(n)}; R² row {_f(pr['row']['r2'])}, column "
                f"{_f(pr['column']['r2'])}; left-right order {_pct(pr['left_right']['accuracy'])}; C11 one patch "
                f"right, top {pa.LINEARITY_RANK} directions {_f(_first(lin['columns'], 'rank_residual'))}"
            )
    return out


def run(
    out: Path, models: list[Model], minilm: dict | None = None, console: Console | None = None, seed: int = 0
) -> tuple[dict, list[Path]]:
    """Measure, draw and write ``models`` side by side into ``out``. ``minilm``: ``report.run``'s numbers when
    MiniLM was analysed (its probes are reused, and its sections open pretrained.md)."""
    from pelab.pretrained.compare_figures import draw

    out.mkdir(parents=True, exist_ok=True)
    names = ", ".join(m.name for m in models)
    shown = escape(visible(names))  # model folders' names: a spinner's text is markup and skips render_str
    status = console.status(f"measuring {shown}") if console is not None else contextlib.nullcontext()
    with status, one_thread(), np.errstate(invalid="ignore", divide="ignore"):  # a constant table gives NaN shares
        numbers = compare.side_by_side(models, seed, minilm if any(m.name == BUILTIN for m in models) else None)
        files = draw(out, models, numbers)
    whole = {**minilm, "side_by_side": numbers} if minilm is not None else {"side_by_side": numbers}
    sections = markdown_sections(minilm) if minilm is not None else {}
    sections["Side by side"] = markdown(numbers)
    md = "".join(f"## {k}\n\n{v}\n\n" for k, v in sections.items())
    files.append(write_atomic(out / "pretrained.md", md))
    # The JSON last: a later report reuses the folder when it is there, so everything it describes must be too.
    files.append(write_atomic(out / JSON_NAME, json.dumps(jsonable(whole), indent=2, allow_nan=False) + "\n"))
    return numbers, files


#: A study's side by side (``for_study``): the models it was measured for, its figures and its numbers.
STUDY_JSON = "side_by_side.json"


def for_study(out: Path, paths: list[str], minilm: dict | None = None, seed: int = 0) -> dict:
    """The side by side of the models a study file names (``[pretrained] models``), for its report.

    Read from ``out/side_by_side.json`` when that was measured for exactly ``paths`` (and its figures are
    there); else every model is loaded first (a folder gone since the study ran fails in one line), and
    measured, drawn and written into ``out`` as `pelab pretrained --model ...` does (pretrained.json,
    pretrained.md, compare_*.png). ``minilm``: MiniLM's numbers from the report, reused when ``mini-lm`` is
    one of the models. Returns {"models": paths, "figures": [file names], "side_by_side": numbers}, as JSON
    reads it back.
    """
    from pelab.weights.hf import load_all

    path = out / STUDY_JSON
    cached = read_json_cache(path, check_study_json)  # damaged: one line, then measured again
    if cached is not None and cached["models"] == list(paths) and all((out / f).is_file() for f in cached["figures"]):
        return cached
    models = load_all(list(paths))
    out.mkdir(parents=True, exist_ok=True)
    for stale in (*out.glob("compare_*.png"), path):  # drawn for another list of models
        stale.unlink(missing_ok=True)
    numbers, files = run(out, models, minilm, seed=seed)
    whole = {"models": list(paths), "figures": [f.name for f in files if f.suffix == ".png"], "side_by_side": numbers}
    text = json.dumps(jsonable(whole), indent=2, allow_nan=False) + "\n"
    write_atomic(path, text)
    return json.loads(text)  # as JSON reads it back, without reading the file again (nor a link put there since)


def check_study_json(cached: object) -> str | None:
    """Why a cached side by side cannot be used (a reason, or an error raised while reading it as the report does);
    None when it can."""
    if not isinstance(cached, dict):
        return f"a JSON {type(cached).__name__}, not an object"
    models, figures, numbers = cached.get("models"), cached.get("figures"), cached.get("side_by_side")
    if not (isinstance(models, list) and all(isinstance(m, str) for m in models)):
        return "models is not a list of names"
    if not (isinstance(figures, list) and all(isinstance(f, str) and "/" not in f for f in figures)):
        return "figures is not a list of file names"
    if not (isinstance(numbers, dict) and isinstance(numbers.get("models"), dict)):
        return "side_by_side has no models"
    summary_lines(numbers)
    key_line(numbers)
    for table in (sequence_table, grid_table, sources_table):
        table(numbers)
    return None


def key_line(numbers: dict, most: int = 4) -> str:
    """The headline of each model (at most ``most``, then how many more): what its position table encodes."""
    parts = []
    for name, n in numbers["models"].items():
        if "positions" in n:
            p = n["positions"]
            parts.append(
                f"{name}: position R² {_f(p['regression']['all']['r2'])}, order {_pct(p['relative_order']['accuracy'])}"
            )
        else:
            pr = n["probes"]
            parts.append(f"{name}: row / column R² {_f(pr['row']['r2'])} / {_f(pr['column']['r2'])}, left-right "
                         f"order {_pct(pr['left_right']['accuracy'])}")  # fmt: skip
    more = len(parts) - most
    return "; ".join(parts[:most]) + (f"; and {more} more" if more > 0 else "")
