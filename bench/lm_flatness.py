"""How far a study folder's language models are from levelling off, run by run, for recording a pilot.

    python bench/lm_flatness.py FOLDER

Prints one Markdown row per finished charlm/mlm run: its test loss over the context-free model's (a language model
learned when this is at most 0.8, the floor every claim uses) and the last fifth of training (1 − validation loss at
the end over validation loss at 80% of the steps, the share the last fifth still gained; issue 38's bar is under 2%),
with the run's seconds. It compares no arms: pilots record whether arms learn and how flat they end, never who won.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

from pelab.report.answer import last_fifth  # the report's own reading


def rows(folder: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{folder / 'results.sqlite'}?mode=ro", uri=True)
    out = []
    for cfg, met, cur, sec in con.execute("select config, metrics, curve, seconds from runs where status = 'done'"):
        c, m = json.loads(cfg), json.loads(met)
        if c["task"]["name"] not in ("charlm", "mlm"):
            continue
        v = [p["val_loss"] for p in json.loads(cur)]
        out.append((c["task"]["name"], c["model"]["d"], c["model"]["combine"], c["train"]["lr"], c["train"]["steps"],
                    m["loss"] / m["baseline_loss"], last_fifth(v), sec))  # fmt: skip
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
