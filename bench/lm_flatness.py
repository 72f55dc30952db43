"""How far a study folder's language models are from levelling off, run by run, for recording a pilot.

    python bench/lm_flatness.py FOLDER

Prints one Markdown row per finished charlm/mlm run: its test loss over the context-free model's (a language model
learned when this is at most 0.8, the floor every claim uses) and the last fifth of training (1 − validation loss at
the end over validation loss at 80% of the steps, the share the last fifth still gained; issue 38's bar is under 2%),
with the run's seconds. It compares no arms: pilots record whether arms learn and how flat they end, never who won.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pelab.errors import visible
from pelab.report.answer import last_fifth  # the report's own reading
from pelab.study.store import Store


def rows(folder: Path) -> list[tuple]:
    """The language-model runs of a study folder, opened as pelab opens any (a link or a damaged row is refused)."""
    with Store(folder, create=False) as store:
        stored = store.rows()
    out = []
    for r in stored:
        c, m = r["config"], r["metrics"]
        if r["status"] != "done" or c["task"]["name"] not in ("charlm", "mlm"):
            continue
        fifth = last_fifth([p["val_loss"] for p in r["curve"]])
        out.append((c["task"]["name"], c["model"]["d"], visible(c["model"]["combine"]), c["train"]["lr"],
                    c["train"]["steps"], m["loss"] / m["baseline_loss"], fifth, r["seconds"]))  # fmt: skip
    return sorted(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    a = p.parse_args()
    print("| task | d | combine | rate | steps | loss / context-free | last fifth | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for t, d, comb, lr, steps, share, fifth, sec in rows(a.folder):
        print(f"| {t} | {d} | {comb} | {lr:g} | {steps} | {share:.3f} | {100 * fifth:.2f}% | {sec:.0f} |")


if __name__ == "__main__":
    main()
