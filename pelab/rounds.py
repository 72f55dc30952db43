"""Sequential seeds, end to end: run a round, read the verdicts, add seeds only where a comparison is still open.

A study with a ``[sequential]`` table (``pelab.study.grid``) asks for a decision instead of a seed count. Round 1
trains every arm on the study's ``seeds``; after each round every claim is decided from the stored runs, as the
report decides it (``report.build.decide_claims``: analyses of stored models included), under the design's alpha
spending (``pelab.study.sequential``); the comparisons still undecided below the cap (``still_open``) name the arms
that get ``step`` more seeds in the next round (each arm up to the largest count an open comparison reading it
asks for, at most the cap; the seeds are the next of one sequence, so arms stay paired). It stops when nothing is
open or every open comparison is at the cap.

Deterministic and resumable: each round trains through ``run_study``, which skips stored runs, and a seed's numbers
do not depend on which seeds share its stack; a rerun replays the rounds from the first, deciding each from the
runs of that round alone, so it takes the same decisions and trains nothing twice, after a kill at any moment.
Each round's seed counts (and what it found open) are written to ``sequential.json`` before its claims are read
(``pelab.study.design``), so the report reads every comparison with the looks it was examined at.

It reads verdicts, so it stands above the report in the layers of ``pyproject.toml`` (only the CLI imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from pelab.errors import NothingFinished, PelabError
from pelab.files import make_dirs
from pelab.report.build import decide_claims
from pelab.report.catalog import all_claims
from pelab.report.registry import ClaimResult
from pelab.rules import INCONCLUSIVE
from pelab.study.design import RECORD, arm_names, write_record
from pelab.study.driver import StudyOutcome, run_study
from pelab.study.grid import Study, with_seeds
from pelab.study.sequential import still_open

Decide = Callable[[Path, Sequence[str]], list[ClaimResult]]


@dataclass
class SequentialOutcome:
    """What the rounds did: each round's outcome of ``run_study``, the seed counts each arm ended with, and the
    comparisons still open at the end (at the cap)."""

    rounds: list[StudyOutcome] = field(default_factory=list)
    seeds: dict[str, int] = field(default_factory=dict)
    still_open: list[str] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return sum(o.ran for o in self.rounds)

    @property
    def skipped(self) -> int:
        """Runs of the last round that were stored before this call trained any."""
        return (self.rounds[-1].total if self.rounds else 0) - self.ran

    @property
    def failed(self) -> int:
        return sum(o.failed for o in self.rounds)

    @property
    def diverged(self) -> int:
        return sum(o.diverged for o in self.rounds)

    @property
    def seconds(self) -> float:
        return sum(o.seconds for o in self.rounds)


def open_rows(claims: Sequence[ClaimResult]) -> list[tuple[str, dict[str, Any]]]:
    """Every comparison (claims.json row of a family: ``claims.row_records``) with the claim it belongs to; rows
    of other shapes (a table of measures) compare no arms and are left out."""
    keys = ("verdict", "a", "b", "a_runs", "b_runs")
    return [(c.id, row) for c in claims for row in c.rows if all(k in row for k in keys)]


def _runs_arm(study: Study) -> dict[str, str]:
    return {r.run_id: r.arm_id for r in study.runs}


#: How an open comparison on a grid's own seeds is marked in the rounds' words: it takes no seeds, ever.
OWN = " (its grid's own seeds: read as they stand)"


def next_counts(
    rows: Sequence[tuple[str, Mapping[str, Any]]], study: Study, counts: Mapping[str, int]
) -> tuple[dict[str, int], list[str]]:
    """The next round's seed count of every arm that an open comparison reads, and those comparisons in words.
    An arm's count goes to the largest that its open comparisons ask for (their paired seeds + step, at most the
    cap); an arm already there (another comparison took it further) gets nothing. An open comparison of an arm on
    its grid's own seeds (``Study.fixed``) is said (marked ``OWN``) and takes no seeds."""
    assert study.sequential is not None
    cap, step = study.sequential.max_seeds, study.sequential.step
    arm_of = _runs_arm(study)
    fixed = set(study.fixed)  # arms of grids with their own seeds never take seeds
    target: dict[str, int] = {}
    words = []
    for claim, row in rows:
        if not study.sequential.buys_seeds(claim):
            continue
        past = max(cap, int(row.get("seeds", 0))) + 1  # a grid's own seeds may number more than the cap
        for o in still_open([row], past, INCONCLUSIVE):  # at the cap too: said, though it takes no seeds
            want = min(cap, o.seeds + step)
            arms = {arm_of[r] for r in (*o.a.runs, *o.b.runs) if r in arm_of}
            if arms & fixed:  # a grid's own seeds: a fixed count, outside the rounds; said, never grown
                words.append(f"{claim} {o.a.label} vs {o.b.label} at {o.seeds} seeds{OWN}{_place(row)}")
                continue
            for arm in arms:
                if want > counts.get(arm, len(study.seeds)):
                    target[arm] = max(target.get(arm, 0), want)
            cap_note = " (the cap)" if o.seeds >= cap else ""
            words.append(f"{claim} {o.a.label} vs {o.b.label} at {o.seeds} seeds{cap_note}{_place(row)}")
    order = list(dict.fromkeys(arm_of.values()))  # the study's order, so every run prints and records alike
    return {a: target[a] for a in order if a in target}, list(dict.fromkeys(words))


def _place(row: Mapping[str, Any]) -> str:
    """ " (reverse, learned, d=16)": the task, and the scheme and width where the comparison holds them, so two
    open comparisons of the same arms' kinds on one task can be told apart."""
    where = dict(row.get("where", {}))
    parts = [str(where[k]) for k in ("task.name", "model.position.scheme") if k in where]
    if "model.d" in where:
        parts.append(f"d={where['model.d']}")
    return f" ({', '.join(parts)})" if parts else ""


def run_sequential(
    study: Study,
    out: Path,
    console: Console | None = None,
    decide: Decide = decide_claims,
    **run: Any,
) -> SequentialOutcome:
    """Run ``study`` (which has a ``[sequential]`` table) in rounds until nothing is open or the cap is reached.
    ``run``: ``run_study``'s options (workers, device, backend, ...); the caller holds the folder's lock."""
    assert study.sequential is not None, "a study without [sequential] runs with run_study"
    console = console or Console()
    out = Path(out)
    seq = study.sequential
    known = [c.id for c in all_claims()]
    if unknown := [c for c in seq.claims if c not in known]:
        raise PelabError(f"sequential.claims: unknown claim {unknown[0]!r}; allowed: {', '.join(known)}")
    names = arm_names(study)
    counts: dict[str, int] = {arm: len(study.fixed.get(arm, study.seeds)) for arm in names}
    history: list[dict[str, Any]] = []
    outcome = SequentialOutcome()
    make_dirs(out)  # no stray folder for a '..' in --out
    for number in range(1, seq.max_seeds + 1):  # every round adds a seed to some arm, so this bounds it
        current = with_seeds(study, counts)
        history.append({"round": number, "seeds": dict(counts)})
        write_record(out, {"seeds": study.seeds, **seq.record()}, history)  # the looks the claims read
        console.print(_round_line(number, counts, study))
        outcome.rounds.append(run_study(current, out, console=console, **{**run, "locked": True}))
        try:
            claims = decide(out, seq.claims)
        except NothingFinished as e:  # no finished run to read (every run failed): nothing can be decided
            console.print(f"round {number}: no verdict can be read ({escape(str(e))})")
            break
        target, words = next_counts(open_rows(claims), current, counts)
        history[-1]["open"] = words
        history[-1]["added"] = {names[a]: n - counts.get(a, len(study.seeds)) for a, n in target.items()}
        write_record(out, {"seeds": study.seeds, **seq.record()}, history)
        which = f" of {', '.join(seq.claims)}" if seq.claims else ""
        if not words:
            console.print(f"round {number}: every comparison{which} is decided")
            break
        # counts on the terminal, so a log stays readable (quick's rounds once printed lines of 160 characters);
        # the comparisons and arms themselves are in sequential.json and the report
        console.print(f"round {number}: {len(words)} comparison(s) still open (listed in {RECORD})")
        if not target:
            if all(OWN in w for w in words):
                console.print(f"round {number}: every comparison{which} that rounds can grow is decided")
            else:
                console.print(f"round {number}: no open comparison can take more seeds (cap {seq.max_seeds})")
            outcome.still_open = words
            break
        added = sum(n - counts.get(a, len(study.seeds)) for a, n in target.items())
        console.print(f"round {number + 1}: {added} more seed(s) to {len(target)} arm(s)")
        counts.update(target)
    outcome.seeds = {names[a]: n for a, n in counts.items()}
    console.print(f"sequential seeds: {len(outcome.rounds)} round(s); {_spread(counts)}")
    return outcome


def _spread(counts: Mapping[str, int]) -> str:
    """ "5 seeds for 12 arm(s), 8 seeds for 6 arm(s)": how many arms hold each seed count."""
    spread: dict[int, int] = {}
    for n in counts.values():
        spread[n] = spread.get(n, 0) + 1
    return ", ".join(f"{k} seeds for {v} arm(s)" for k, v in sorted(spread.items()))


def _round_line(number: int, counts: Mapping[str, int], study: Study) -> str:
    cap = study.sequential.max_seeds if study.sequential else len(study.seeds)
    line = f"[bold]round {number}[/] (sequential seeds, cap {cap}): {_spread(counts)}"
    if study.fixed:  # counted among the arms above, but no round's doing; a line of its own keeps both under 100
        line += f"\n  {len(study.fixed)} of those arms keep their grid's own seeds (no round adds to them)"
    return line
