"""How much of a language-model comparison's per-seed spread is its test sample's, for sizing a design.

    python bench/eval_noise.py FOLDER --task mlm --batches 400

A paired comparison's spread over seeds has two sources: the models (each seed trains its own) and the test sample
each seed is scored on (``train.eval_batches`` batches of ``train.eval_batch_size`` windows, the same windows for
every arm of a seed). More seeds shrink both; a larger test sample shrinks only the second, and costs no training.
This re-scores every finished run of one task in a study folder with ``--checkpoints`` on a second, larger test
sample (drawn by another generator, the same for every arm of a seed, so still paired), after checking that the
study's own sample gives back the stored bits per byte exactly. Each arm is read at its stored rate choice (lowest
mean validation loss over seeds, as the report chooses). For each cell (concat_split against add at one width;
concat_wide against add at its width) it prints the standard deviation over seeds of the paired log-ratio of bits
per byte on the stored sample and on the larger one, the share of the variance that the larger sample removed, and
the fewest seeds whose 95% interval would fit inside ±2% at the larger sample's spread (the report's rough floor:
it takes that spread as the true one and the true gap as zero).

It prints spreads and interval half-widths, never a difference's sign: it is read to size the next design (its
seeds and its test sample), not to decide a claim, and reading it on a study whose verdicts were read is
exploratory.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

import torch
from scipy import stats

from pelab.report.answer import MOST_SEEDS, seeds_to_fit  # the report's own floor
from pelab.study.folder import StudyFolder
from pelab.tasks import task_class
from pelab.train import evaluate

#: Another test sample for every arm of a seed: a generator the study never uses (its test, validation and curve
#: generators use 1_000_003, 2_000_029 and 3_000_017).
OTHER = 4_000_037


def rescore(folder: Path, task: str, batches: int, cache: Path, seeds: set[int] | None) -> list[dict]:
    """Every finished run of ``task`` with weights (of ``seeds`` where given: a folder may also hold an earlier
    design's): its config keys, stored metrics, and bits per byte on the larger sample. Cached by run id in
    ``cache`` (a CSV), so a rerun scores only what is new."""
    done: dict[str, dict] = {}
    if cache.exists():
        with cache.open() as f:
            done = {r["run_id"]: r for r in csv.DictReader(f)}
    study = StudyFolder(folder)
    with study.store(create=False) as store:
        rows = [r for r in store.rows(quiet=True) if r["status"] == "done" and r["config"]["task"]["name"] == task
                and (seeds is None or r["config"]["seed"] in seeds)]  # fmt: skip
    todo = [r for r in rows if r["run_id"] not in done and study.has_checkpoint(r["run_id"])]
    for i, r in enumerate(todo, 1):
        model, cfg = study.load_trained(r["run_id"])
        t = task_class(cfg.task.name)(cfg.task)
        n = t.n
        dev = torch.device("cpu")
        stored = evaluate(model, t, n, cfg.train.eval_batch_size, cfg.train.eval_batches,
                          torch.Generator().manual_seed(1_000_003 * (cfg.seed + 1) + n), dev)  # fmt: skip
        if not math.isclose(stored["bpb"], r["metrics"]["bpb"], rel_tol=1e-9):
            raise SystemExit(
                f"{r['run_id']}: the study's own sample gives {stored['bpb']}, stored {r['metrics']['bpb']}"
            )
        big = evaluate(model, t, n, cfg.train.eval_batch_size, batches,
                       torch.Generator().manual_seed(OTHER * (cfg.seed + 1) + n), dev)  # fmt: skip
        m = cfg.model
        done[r["run_id"]] = {
            "run_id": r["run_id"], "seed": cfg.seed, "d": m.d, "scheme": m.position.scheme, "combine": m.combine,
            "lr": cfg.train.lr, "steps": cfg.train.steps, "val_loss": r["metrics"]["val_loss"],
            "bpb": stored["bpb"], "bpb_big": big["bpb"],
        }  # fmt: skip
        print(f"\r  re-scored {i}/{len(todo)}", end="", flush=True)
        if i % 20 == 0 or i == len(todo):
            write(cache, list(done.values()))
    print()
    ids = {r["run_id"] for r in rows}
    return [done[k] for k in done if k in ids]


def write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def chosen(rows: list[dict]) -> dict[tuple, dict[int, dict]]:
    """Each arm (d, scheme, combine) at its rate of lowest mean validation loss: {arm: {seed: row}}."""
    by_arm: dict[tuple, dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by_arm[(int(r["d"]), r["scheme"], r["combine"], int(r["steps"]))][float(r["lr"])].append(r)
    out = {}
    for arm, rates in by_arm.items():
        lr = min(rates, key=lambda x: (statistics.fmean(float(r["val_loss"]) for r in rates[x]), x))
        if arm[:3] in out:
            raise SystemExit(f"arm {arm[:3]} trained at two budgets: name the design's seeds with --seeds")
        out[arm[:3]] = {int(r["seed"]): r for r in rates[lr]}
    return out


def spread(a: dict[int, dict], b: dict[int, dict], key: str) -> tuple[int, float, float]:
    """Seeds, sd of the paired log-ratio (in %), and its 95% t half-width (in %)."""
    seeds = sorted(set(a) & set(b))
    x = [100 * math.log(float(a[s][key]) / float(b[s][key])) for s in seeds]
    sd = statistics.stdev(x)
    return len(x), sd, stats.t.ppf(0.975, len(x) - 1) * sd / math.sqrt(len(x))


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
    rows = rescore(
        a.folder, a.task, a.batches, a.cache or a.folder / f"eval_noise-{a.task}.csv", set(a.seeds) if a.seeds else None
    )
    arms = chosen([r for r in rows if a.steps is None or int(r["steps"]) == a.steps])
    print(
        f"{a.task}{f' at {a.steps} steps' if a.steps else ''}: paired log-ratio of bits per byte over seeds, "
        f"stored test sample against {a.batches} batches"
    )
    print("| cell | scheme | seeds | sd stored | sd larger | ±95% stored | ±95% larger | variance removed | "
          "seeds for ±2% |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    widths = sorted({d for d, _, c in arms if c == "concat_split"})
    for d in widths:
        wide = d + d // 4
        for scheme in sorted({s for dd, s, c in arms if dd == d and c == "concat_split"}):
            cells = (("concat_split vs add", (d, scheme, "concat_split"), (d, scheme, "add")),
                     (f"concat_wide vs add at {wide}", (d, scheme, "concat_wide"), (wide, scheme, "add")))  # fmt: skip
            for name, x, y in cells:
                if x not in arms or y not in arms:
                    continue
                n, sd0, h0 = spread(arms[x], arms[y], "bpb")
                _, sd1, h1 = spread(arms[x], arms[y], "bpb_big")
                gone = 1 - (sd1 / sd0) ** 2 if sd0 else float("nan")
                need = seeds_to_fit(sd1 / 100, 0.95)
                print(f"| d={d}: {name} | {scheme} | {n} | {sd0:.2f}% | {sd1:.2f}% | {h0:.2f}% | {h1:.2f}% | "
                      f"{gone:.0%} | {need or f'> {MOST_SEEDS}'} |")  # fmt: skip
    print("\nEach arm alone (unpaired): coefficient of variation of bits per byte over seeds, on the larger sample")
    print("| d | scheme | combine | rate kept | seeds | cv |")
    print("|---|---|---|---|---|---|")
    for (d, scheme, combine), runs in sorted(arms.items()):
        print(f"| {d} | {scheme} | {combine} | {float(next(iter(runs.values()))['lr']):g} | {len(runs)} | "
              f"{cv(runs):.1f}% |")  # fmt: skip


if __name__ == "__main__":
    main()
