"""The sequential record of a study folder, and the looks each comparison was examined at.

A sequential study (``[sequential]`` in its file) runs in rounds (``pelab.rounds``); after each, the seeds each arm
(``RunConfig.arm_id``) holds are written to ``sequential.json`` in the folder, atomically. That record is the whole
of the design's history: the runs of a round are the arms' first n seeds (``grid.seed_sequence``), so a run's
round is the first round whose count for its arm passes the run's seed's place in that sequence.

A comparison's looks are then every paired seed count it was examined at: at round r, the seeds that both of its
sides held by then, over every round (a round where an arm got seeds for another comparison counts too; a round
where neither side changed repeats a look and is not counted twice). The report reads every comparison under the
design (``reading_under``): ``rules.decide`` asks ``looks_for`` for the looks of each comparison that does not
carry its own, so every claim that decides through the rules reads its rows at their last look's nominal level,
whatever built its comparisons (trained arms or analyses of stored models).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pelab.config import TASK_DECIDES
from pelab.errors import PelabError
from pelab.files import read_file, write_atomic
from pelab.study.grid import Study, seed_sequence, with_seeds
from pelab.study.sequential import Looks

RECORD = "sequential.json"
#: Largest sequential record read (bytes): a record of every round of the paper preset is a few hundred KB.
MAX_RECORD_BYTES = 1 << 26


@dataclass(frozen=True)
class Design:
    """The design a study folder was read under: the cap, the spending function, and each run's (seed, round)."""

    cap: int
    spending: str
    #: run id -> (seed, the round whose look first saw it), for every run of the design
    runs: Mapping[str, tuple[int, int]]
    rounds: int

    def looks(self, a_runs: Sequence[str], b_runs: Sequence[str]) -> Looks | None:
        """The looks of a comparison of these runs; None when a side holds runs outside the design (a fixed
        seed count) or no look had two paired seeds."""
        if not a_runs or not b_runs or any(r not in self.runs for r in (*a_runs, *b_runs)):
            return None
        counts: list[int] = []
        for r in range(1, self.rounds + 1):
            a = {self.runs[x][0] for x in a_runs if self.runs[x][1] <= r}
            b = {self.runs[x][0] for x in b_runs if self.runs[x][1] <= r}
            n = len(a & b)
            if n >= 2 and (not counts or n > counts[-1]):
                counts.append(n)
        return Looks(tuple(counts), self.cap, self.spending) if counts else None  # type: ignore[arg-type]


def design_of(study: Study, rounds: Sequence[Mapping[str, int]]) -> tuple[Study, Design]:
    """The study with every seed its rounds added, and its design. ``rounds``: each round's seed count per arm."""
    assert study.sequential is not None
    last = dict(rounds[-1]) if rounds else {}
    full = with_seeds(study, last)
    order = {s: i for i, s in enumerate(seed_sequence(study.seeds, study.sequential.max_seeds))}
    runs: dict[str, tuple[int, int]] = {}
    for cfg in full.runs:
        if cfg.arm_id in study.fixed:  # its grid's own seeds: outside the design, read without interim looks
            continue
        place = order[cfg.seed]
        seen = [r for r, counts in enumerate(rounds, start=1) if counts.get(cfg.arm_id, len(study.seeds)) > place]
        runs[cfg.run_id] = (cfg.seed, seen[0] if seen else 1)
    design = Design(study.sequential.max_seeds, study.sequential.spending, runs, max(len(rounds), 1))
    return full, design


def read_record(folder: Path) -> dict[str, Any] | None:
    """``sequential.json`` of a study folder, or None where the study has none (fixed seeds, or no round yet)."""
    path = Path(folder) / RECORD
    if not os.path.lexists(path):
        return None
    data = read_file(path, "a sequential record", MAX_RECORD_BYTES)  # never through a link, never a FIFO
    try:
        record = json.loads(data)
        counts = [{str(k): int(v) for k, v in r["seeds"].items()} for r in record["rounds"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise PelabError(f"out: {path} is not a sequential record pelab wrote ({type(e).__name__}: {e})") from None
    return {**record, "counts": counts}


def write_record(folder: Path, design: Mapping[str, Any], rounds: Sequence[Mapping[str, Any]]) -> None:
    """The design and every round so far (each with its arms' seed counts), written whole or not at all."""
    write_atomic(Path(folder) / RECORD, json.dumps({"design": dict(design), "rounds": list(rounds)}, indent=1))


def load_design(folder: Path, study: Study) -> tuple[Study, Design | None]:
    """A folder's study with its added seeds, and its design; the study unchanged and None without a design."""
    if study.sequential is None:
        return study, None
    record = read_record(folder)
    return design_of(study, record["counts"] if record else [])


_CURRENT: ContextVar[Design | None] = ContextVar("pelab_design", default=None)


@contextmanager
def reading_under(design: Design | None) -> Iterator[None]:
    """Every comparison decided inside is read under ``design`` (``looks_for``); None: fixed seeds."""
    token = _CURRENT.set(design)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def looks_for(a_runs: Sequence[str], b_runs: Sequence[str]) -> Looks | None:
    """The looks of a comparison of these runs under the design being read, or None (fixed seeds)."""
    design = _CURRENT.get()
    return None if design is None else design.looks(a_runs, b_runs)


def arm_names(study: Study) -> dict[str, str]:
    """Each arm (``RunConfig.arm_id``) in words: its task and its values of the study's axes ("reverse: add");
    arms that read alike get the settings that tell them apart ("d=40"), and, if still alike, their id's first
    characters."""
    from pelab.study.stats import flatten

    names: dict[str, str] = {}
    flats: dict[str, dict[str, Any]] = {}
    for cfg in study.runs:
        if cfg.arm_id in names:
            continue
        flat = flats[cfg.arm_id] = {k: v for k, v in flatten(cfg.model_dump(mode="json"), "").items() if k != "seed"}
        values = [str(flat.get(k)) for k in study.axes if k in flat and k != "task.name"]  # the name says it
        names[cfg.arm_id] = f"{cfg.task.name}: {', '.join(values)}" if values else cfg.task.name
    for name in {n for n in names.values() if list(names.values()).count(n) > 1}:
        alike = [a for a, n in names.items() if n == name]
        keys = sorted({k for a in alike for k in flats[a]} - set(study.axes))
        differ = [k for k in keys if len({str(flats[a].get(k)) for a in alike}) > 1]
        if any(k.startswith("task.") for k in differ):  # the model keys a task sets follow from its settings
            differ = [k for k in differ if not (k.startswith("model.") and k.removeprefix("model.") in TASK_DECIDES)]
        for a in alike:
            names[a] = f"{name}, " + ", ".join(f"{k.rsplit('.', 1)[-1]}={flats[a].get(k)}" for k in differ)
    twice = {n for n in names.values() if list(names.values()).count(n) > 1}
    return {a: f"{n} ({a[:6]})" if n in twice else n for a, n in names.items()}


def seeds_text(study: Study, design: Design) -> str:
    """The design in words and the seeds each arm got, for the report's method line."""
    assert study.sequential is not None
    got: dict[str, int] = {}
    for run_id, cfg in ((r.run_id, r) for r in study.runs):
        if run_id in design.runs:
            got[cfg.arm_id] = got.get(cfg.arm_id, 0) + 1
    names = arm_names(study)
    each = "; ".join(f"{names[a]} {n}" for a, n in got.items())
    seq = study.sequential
    if not got:  # every arm on its grid's own seeds: no round grew any
        return fixed_text(study).removeprefix("; ")
    return (
        f"started at {len(study.seeds)} seeds per arm, {seq.step} more per round to the arms of comparisons still "
        f"open{_of_claims(seq.claims)}, at most {seq.max_seeds}; {design.rounds} round(s); seeds each arm got: {each}"
        f"{fixed_text(study)}"
    )


def fixed_text(study: Study) -> str:
    """ "; fixed seeds, read without interim looks: lookup: add, d=16 30 (seeds 200–229); …" for the arms of
    grids with their own seeds (``Study.fixed``), "" where there are none."""
    if not study.fixed:
        return ""
    names = arm_names(study)
    each = "; ".join(f"{names[a]} {len(s)} (seeds {seed_span(s)})" for a, s in study.fixed.items())
    return f"; fixed seeds, read without interim looks: {each}"


def seed_span(seeds: Sequence[int]) -> str:
    """ "200–229" for consecutive seeds, "0, 2, 7–9" otherwise."""
    runs: list[list[int]] = []
    for s in sorted(seeds):
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _of_claims(claims: Sequence[str]) -> str:
    """Which claims' open comparisons bought seeds, in words ("" for every claim's)."""
    if not claims:
        return ""
    return f" (of {', '.join(claims)}; every other claim read the same design, so at no looser a level)"
