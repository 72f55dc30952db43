"""How much of a language-model comparison's per-seed spread is its test sample's, for sizing a design.

    python bench/eval_noise.py FOLDER --task mlm --batches 400

A paired comparison's spread over seeds has two sources: the models (each seed trains its own) and the test sample
each seed is scored on (``train.eval_batches`` batches of ``train.eval_batch_size`` windows, the same windows for
every arm of a seed). More seeds shrink both; a larger test sample shrinks only the second, and costs no training.
This re-scores every finished run of one task in a study folder with ``--checkpoints`` on a second, larger test
sample (drawn by another generator, the same for every arm of a seed, so still paired), after checking that the
study's own sample gives back the stored bits per byte exactly. Each arm is read at the rate the report keeps
(``pelab.report.rates.choose``: lowest mean validation loss over seeds). For each cell (concat_split against add at
one width; concat_wide against add at its width) it prints the standard deviation over seeds of the paired log-ratio
of bits per byte on the stored sample and on the larger one, the share of the variance that the larger sample
removed, and the fewest seeds whose 95% interval would fit inside ±2% at the larger sample's spread (the report's
rough floor: it takes that spread as the true one and the true gap as zero).

It prints spreads and interval half-widths, never a difference's sign: it is read to size the next design (its
seeds and its test sample), not to decide a claim, and reading it on a study whose verdicts were read is
exploratory.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import statistics
from collections import defaultdict
from pathlib import Path

import torch

from pelab.errors import visible
from pelab.files import MAX_CACHE_BYTES, read_file, write_atomic
from pelab.report.answer import MOST_SEEDS, seeds_to_fit  # the report's own floor
from pelab.report.rates import choose  # the report's own rate choice
from pelab.study.folder import StudyFolder
from pelab.study.stats import runs_frame, t_interval
from pelab.tasks import task_class
from pelab.train import evaluate

#: Another test sample for every arm of a seed: a generator the study never uses (its test, validation and curve
#: generators use 1_000_003, 2_000_029 and 3_000_017).
OTHER = 4_000_037
#: What the cache keeps of each re-scored run.
FIELDS = ["run_id", "seed", "d", "scheme", "combine", "lr", "steps", "bpb", "bpb_big"]


def stored(folder: Path, task: str, seeds: set[int] | None) -> list[dict]:
    """The finished runs of ``task`` in a study folder, as its store keeps them (of ``seeds`` where given: a folder
    may also hold an earlier design's)."""
    with StudyFolder(folder).store(create=False) as store:
        return [r for r in store.rows(quiet=True) if r["status"] == "done" and r["config"]["task"]["name"] == task
                and (seeds is None or r["config"]["seed"] in seeds)]  # fmt: skip


def rescore(folder: Path, rows: list[dict], batches: int, cache: Path) -> list[dict]:
    """Each of ``rows`` with weights: its arm, seed and budget, and bits per byte on the study's own test sample
    (which must give back the stored number) and on the larger one. Cached by run id in ``cache`` (a CSV, read and
    written as pelab treats a study folder's files: never through a link), so a rerun scores only what is new."""
    done: dict[str, dict] = {}
    if os.path.lexists(cache):
        text = read_file(cache, "an eval_noise cache", MAX_CACHE_BYTES).decode()
        done = {r["run_id"]: r for r in csv.DictReader(io.StringIO(text))}
    study = StudyFolder(folder)
    todo = [r for r in rows if r["run_id"] not in done and study.has_checkpoint(r["run_id"])]
    for i, r in enumerate(todo, 1):
        model, cfg = study.load_trained(r["run_id"])
        t = task_class(cfg.task.name)(cfg.task)
        n = t.n
        dev = torch.device("cpu")
        own = evaluate(model, t, n, cfg.train.eval_batch_size, cfg.train.eval_batches,
                       torch.Generator().manual_seed(1_000_003 * (cfg.seed + 1) + n), dev)  # fmt: skip
        if not math.isclose(own["bpb"], r["metrics"]["bpb"], rel_tol=1e-9):
            raise SystemExit(
                f"{visible(r['run_id'])}: the study's own sample gives {own['bpb']}, stored {r['metrics']['bpb']}"
            )
        big = evaluate(model, t, n, cfg.train.eval_batch_size, batches,
                       torch.Generator().manual_seed(OTHER * (cfg.seed + 1) + n), dev)  # fmt: skip
        m = cfg.model
        done[r["run_id"]] = {"run_id": r["run_id"], "seed": cfg.seed, "d": m.d, "scheme": m.position.scheme,
                             "combine": m.combine, "lr": cfg.train.lr, "steps": cfg.train.steps, "bpb": own["bpb"],
                             "bpb_big": big["bpb"]}  # fmt: skip
        print(f"\r  re-scored {i}/{len(todo)}", end="", flush=True)
        if i % 20 == 0 or i == len(todo):
            write(cache, list(done.values()))
    print()
    ids = {r["run_id"] for r in rows}
    return [done[k] for k in done if k in ids]


def write(path: Path, rows: list[dict]) -> None:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=FIELDS, extrasaction="ignore")  # a cache an older version wrote: its fields
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, out.getvalue())  # a link at the cache's name is replaced, never written through


def kept(rows: list[dict]) -> set[str]:
    """The run ids the report reads: each arm at its rate of lowest mean validation loss (``rates.choose``, the
    report's own choice; every run counts as tuned, and an arm with one rate keeps it)."""
    frame = runs_frame(rows)
    chosen, _ = choose(frame, set(frame.run_id))
    return set(chosen.run_id)


def arms(scored: list[dict], keep: set[str]) -> dict[tuple, dict[int, dict]]:
    """The kept runs by arm (d, scheme, combine): {arm: {seed: row}}."""
    out: dict[tuple, dict[int, dict]] = defaultdict(dict)
    budgets: dict[tuple, set[int]] = defaultdict(set)
    for r in scored:
        if r["run_id"] in keep:
            arm = (int(r["d"]), r["scheme"], r["combine"])
            budgets[arm].add(int(r["steps"]))
            out[arm][int(r["seed"])] = r
    if any(len(b) > 1 for b in budgets.values()):
        raise SystemExit("an arm trained at two budgets: read one with --steps, or name the design's seeds (--seeds)")
    return dict(out)


def spread(a: dict[int, dict], b: dict[int, dict], key: str) -> tuple[int, float, float]:
    """Seeds, sd of the paired log-ratio (in %), and its 95% t half-width (in %)."""
    seeds = sorted(set(a) & set(b))
    x = [100 * math.log(float(a[s][key]) / float(b[s][key])) for s in seeds]
    _, lo, hi = t_interval(x)
    return len(x), statistics.stdev(x), (hi - lo) / 2


def cv(runs: dict[int, dict]) -> float:
    """An arm's spread over seeds on the larger sample, in % of its mean (no other arm enters it)."""
    x = [float(r["bpb_big"]) for r in runs.values()]
    return 100 * statistics.stdev(x) / statistics.fmean(x)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--task", default="mlm", choices=["mlm", "charlm"])
    p.add_argument("--batches", type=int, default=400, help="batches of the larger test sample (default 400)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="the design's seeds (default: every seed)")
    p.add_argument("--steps", type=int, default=None, help="read only the runs of this budget (default: every run)")
    p.add_argument(
        "--cache", type=Path, default=None, help="CSV of re-scored runs (default FOLDER/eval_noise-TASK.csv)"
    )
    a = p.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rows = [r for r in stored(a.folder, a.task, set(a.seeds) if a.seeds else None)
            if a.steps is None or r["config"]["train"]["steps"] == a.steps]  # fmt: skip
    by_arm = arms(rescore(a.folder, rows, a.batches, a.cache or a.folder / f"eval_noise-{a.task}.csv"), kept(rows))
    print(
        f"{a.task}{f' at {a.steps} steps' if a.steps else ''}: paired log-ratio of bits per byte over seeds, "
        f"stored test sample against {a.batches} batches"
    )
    print("| cell | scheme | seeds | sd stored | sd larger | ±95% stored | ±95% larger | variance removed | "
          "seeds for ±2% |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    widths = sorted({d for d, _, c in by_arm if c == "concat_split"})
    for d in widths:
        wide = d + d // 4
        for scheme in sorted({s for dd, s, c in by_arm if dd == d and c == "concat_split"}):
            cells = (("concat_split vs add", (d, scheme, "concat_split"), (d, scheme, "add")),
                     (f"concat_wide vs add at {wide}", (d, scheme, "concat_wide"), (wide, scheme, "add")))  # fmt: skip
            for name, x, y in cells:
                if x not in by_arm or y not in by_arm:
                    continue
                n, sd0, h0 = spread(by_arm[x], by_arm[y], "bpb")
                _, sd1, h1 = spread(by_arm[x], by_arm[y], "bpb_big")
                gone = 1 - (sd1 / sd0) ** 2 if sd0 else float("nan")
                need = seeds_to_fit(sd1 / 100, 0.95)
                print(f"| d={d}: {name} | {scheme} | {n} | {sd0:.2f}% | {sd1:.2f}% | {h0:.2f}% | {h1:.2f}% | "
                      f"{gone:.0%} | {need or f'> {MOST_SEEDS}'} |")  # fmt: skip
    print("\nEach arm alone (unpaired): coefficient of variation of bits per byte over seeds, on the larger sample")
    print("| d | scheme | combine | rate kept | seeds | cv |")
    print("|---|---|---|---|---|---|")
    for (d, scheme, combine), runs in sorted(by_arm.items()):
        print(f"| {d} | {scheme} | {combine} | {float(next(iter(runs.values()))['lr']):g} | {len(runs)} | "
              f"{cv(runs):.1f}% |")  # fmt: skip


if __name__ == "__main__":
    main()
