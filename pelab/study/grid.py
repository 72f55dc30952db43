"""Study files (TOML) and their expansion into runs.

A study holds everything equal (``[task]``, ``[model]``, ``[train]``) except its
scientific axes, and pairs seeds across arms. One or more grids:

    name = "reverse: add or concatenate?"
    seeds = [0, 1, 2]
    [task]
    name = "reverse"
    [model]
    d = 64
    [train]
    steps = 300
    [axes]                                   # shorthand for a single grid
    "model.combine" = ["add", "concat_split"]

    [[grid]]                                 # or several, each with fixed settings
    name = "attention-level schemes"
    set = { "model.combine" = "none" }
    axes = { "model.position.scheme" = ["rotary", "alibi"] }

Axis keys are dotted paths into a run's config; an unknown key fails with the list
of valid ones. The same config reached from two grids is one run.
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pelab.config import TASK_DECIDES, PositionConfig, RunConfig, validation_message
from pelab.errors import PelabError

TOP_KEYS = ("name", "description", "seeds", "task", "model", "train", "axes", "grid", "report", "pretrained")
#: What a [pretrained] table held while C9 trained outside the grids; refused, pointing at the C9 grids.
OLD_PRETRAINED_KEYS = ("seeds", "steps", "batch_size", "length", "d", "d_position", "n_layers", "n_heads", "lr")
REPORT_KEYS = {"floor": 0.8, "margin": 0.01}
GRID_KEYS = ("name", "set", "axes")


def settable_keys() -> list[str]:
    """Every dotted path a study may set or vary."""

    def walk(prefix: str, cls: type[BaseModel]) -> list[str]:
        out = []
        for name, f in cls.model_fields.items():
            if prefix == "model." and name in TASK_DECIDES:
                continue
            if name == "position":
                out += walk(f"{prefix}position.", PositionConfig)
            elif isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
                out += walk(f"{prefix}{name}.", f.annotation)
            elif name != "seed":
                out.append(prefix + name)
        return out

    return walk("", RunConfig)


@dataclass
class Grid:
    name: str
    fixed: dict[str, Any]
    axes: dict[str, list[Any]]


@dataclass
class Study:
    name: str
    description: str
    seeds: list[int]
    base: dict[str, Any]
    grids: list[Grid]
    source: str = ""
    #: verdict settings: accuracy floor for "learned", equivalence margin
    report: dict[str, float] = field(default_factory=lambda: dict(REPORT_KEYS))
    #: ``[pretrained] models``: local Hugging Face folders (or "mini-lm") the report's C16 compares side by
    #: side; part of no run's config, so no run id depends on it
    pretrained_models: list[str] = field(default_factory=list)
    runs: list[RunConfig] = field(default_factory=list)
    #: run id -> names of the grids that contain it
    membership: dict[str, list[str]] = field(default_factory=dict)
    #: runs of arms that train at several learning rates (``train.lr`` given as a list): the report keeps,
    #: per arm, the rate with the best validation loss, and scores it on the test split
    tuned: set[str] = field(default_factory=set)

    @property
    def learning_rates(self) -> list[float]:
        """Every rate some arm is tuned over, ascending; empty when every arm trains at one fixed rate."""
        return sorted({r.train.lr for r in self.runs if r.run_id in self.tuned})

    @property
    def axes(self) -> list[str]:
        """Every key varied by some grid, in first-seen order: the scientific axes."""
        seen: dict[str, None] = {}
        for g in self.grids:
            for k in g.axes:
                seen.setdefault(k, None)
        return list(seen)


def _set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def _check_keys(where: str, keys: list[str], allowed: list[str]) -> None:
    for k in keys:
        if k not in allowed:
            raise PelabError(f"{where}: unknown key {k!r}; allowed: {', '.join(allowed)}")


def _flatten(prefix: str, tree: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten(f"{prefix}{k}.", v))
        else:
            out[prefix + k] = v
    return out


def _rates(where: str, value: Any) -> list[Any] | None:
    """A list given for ``train.lr`` (a nuisance grid: each arm at every rate), checked; None for one rate."""
    if not isinstance(value, list):
        return None
    if not value or not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in value):
        raise PelabError(f"{where}train.lr: a list of learning rates must hold positive numbers (got {value!r})")
    if len(set(value)) != len(value):
        raise PelabError(f"{where}train.lr: the list of learning rates repeats a value (got {value!r})")
    return list(value)


def _pretrained_models(table: Any) -> list[str]:
    """``[pretrained] models = [...]``, checked for form only (``load_study`` reads the folders)."""
    if table is None:
        return []
    if not isinstance(table, dict):
        raise PelabError('pretrained: must be a table, e.g. [pretrained] models = ["mini-lm", "/path/to/model"]')
    old = [k for k in table if k in OLD_PRETRAINED_KEYS]
    if old:
        raise PelabError(
            f"pretrained: C9's runs are ordinary [[grid]]s of the study now (task wordorder); remove {old[0]!r} "
            "from the [pretrained] table (it only names models to compare) and copy the C9 grids from "
            "pelab/presets/quick.toml"
        )
    _check_keys("pretrained", list(table), ["models"])
    models = table.get("models")
    ok = isinstance(models, list) and models
    if not ok or not all(isinstance(m, str) and m.strip() and m.isprintable() and len(m) <= 4096 for m in models):
        raise PelabError(
            'pretrained.models: must be a non-empty list of local Hugging Face folders or "mini-lm" '
            f"(got {models!r:.200})"
        )
    twice = [m for m in models if models.count(m) > 1]
    if twice:
        raise PelabError(f"pretrained.models: {twice[0]!r} is listed twice")
    return list(models)


def parse_study(text: str, source: str = "") -> Study:
    """Parse and fully validate a study (every run is constructed), or raise one PelabError."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PelabError(f"study file: not valid TOML ({e})") from None
    pretrained_models = _pretrained_models(raw.get("pretrained"))
    _check_keys("study", list(raw), list(TOP_KEYS))
    allowed = settable_keys()
    base: dict[str, Any] = {}
    for section in ("task", "model", "train"):
        value = raw.get(section, {})
        if not isinstance(value, dict):
            raise PelabError(f"{section}: must be a table of settings")
        flat = _flatten(f"{section}.", value)
        _check_keys(section, list(flat), allowed)
        for k, v in flat.items():
            _set_dotted(base, k, v)
    seeds = raw.get("seeds", [0, 1, 2])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise PelabError(f"seeds: must be a non-empty list of non-negative integers (got {seeds!r})")
    raw_grids = list(raw.get("grid", []))
    if "axes" in raw:
        raw_grids.insert(0, {"name": "main", "axes": raw["axes"]})
    if not raw_grids:
        raw_grids = [{"name": "main", "axes": {}}]
    grids = []
    for i, g in enumerate(raw_grids):
        if not isinstance(g, dict):
            raise PelabError("grid: each [[grid]] must be a table with name, set and axes")
        name = str(g.get("name", f"grid {i + 1}"))
        _check_keys(f"grid {name!r}", list(g), list(GRID_KEYS))
        fixed, axes = g.get("set", {}), g.get("axes", {})
        _check_keys(f"grid {name!r} set", list(fixed), allowed)
        _check_keys(f"grid {name!r} axes", list(axes), allowed)
        for k, v in axes.items():
            if not isinstance(v, list) or not v:
                raise PelabError(f"axes: {k!r} must be a non-empty list of values (got {v!r})")
        grids.append(Grid(name, dict(fixed), {k: list(v) for k, v in axes.items()}))
    report = raw.get("report", {})
    if not isinstance(report, dict):
        raise PelabError("report: must be a table with floor and margin")
    _check_keys("report", list(report), list(REPORT_KEYS))
    for k, v in report.items():
        if not isinstance(v, int | float) or not 0 <= v < 1:
            raise PelabError(f"report.{k}: must be a number in [0, 1) (got {v!r})")
    study = Study(
        report={**REPORT_KEYS, **{k: float(v) for k, v in report.items()}},
        name=str(raw.get("name", Path(source).stem if source else "study")),
        description=str(raw.get("description", "")),
        seeds=list(seeds),
        base=base,
        grids=grids,
        source=text,
        pretrained_models=pretrained_models,
    )
    expand(study)
    return study


def expand(study: Study) -> None:
    """Fill ``study.runs``: every grid point x seed, validated, deduplicated by run id."""
    runs: dict[str, RunConfig] = {}
    membership: dict[str, list[str]] = {}
    tuned: set[str] = set()
    for g in study.grids:
        keys = list(g.axes)
        if "train.lr" in g.axes and any(isinstance(v, list) for v in g.axes["train.lr"]):
            raise PelabError(f"grid {g.name!r} axes: 'train.lr' values must be numbers (a list in set or [train] "
                             "makes the rate a nuisance parameter instead)")  # fmt: skip
        for values in itertools.product(*(g.axes[k] for k in keys)):
            point = dict(zip(keys, values, strict=True))
            settings = {**_flatten("", study.base), **g.fixed, **point}
            rates = _rates(f"grid {g.name!r}: ", settings.get("train.lr"))
            for seed, lr in itertools.product(study.seeds, rates or [None]):
                tree: dict[str, Any] = {}
                for k, v in settings.items():
                    _set_dotted(tree, k, v)
                if lr is not None:
                    tree["train"]["lr"] = lr
                tree["seed"] = seed
                try:
                    cfg = RunConfig.model_validate(tree)
                except ValidationError as e:
                    where = ", ".join(f"{k}={v}" for k, v in point.items()) or "base settings"
                    raise PelabError(f"grid {g.name!r} ({where}): {validation_message(e)}") from None
                except PelabError as e:
                    where = ", ".join(f"{k}={v}" for k, v in point.items()) or "base settings"
                    raise PelabError(f"grid {g.name!r} ({where}): {e}") from None
                runs.setdefault(cfg.run_id, cfg)
                membership.setdefault(cfg.run_id, [])
                if g.name not in membership[cfg.run_id]:
                    membership[cfg.run_id].append(g.name)
                if lr is not None:
                    tuned.add(cfg.run_id)
    study.runs = list(runs.values())
    study.membership = membership
    study.tuned = tuned


def load_study(path: str | Path) -> Study:
    path = Path(path)
    if not path.is_file():
        raise PelabError(f"study: no such file {str(path)!r}")
    study = parse_study(path.read_text(), str(path))
    if study.pretrained_models:  # every folder read and checked (one line, exit 2) before any run
        from pelab.pretrained.hf import load_all

        load_all(study.pretrained_models)
    return study
