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

    [sequential]                             # optional: a decision instead of a seed count
    max_seeds = 12                           # the cap; ``seeds`` are the first round
    step = 2                                 # seeds added per round to the arms of open comparisons
    spending = "obrien_fleming"              # or "pocock" (pelab.study.sequential)
    claims = ["C6", "C7"]                    # optional: only these claims' open comparisons buy seeds

    [[grid]]                                 # a grid may train its own seeds: a fixed count, never extended
    name = "a confirmatory test"             # by sequential rounds and read without interim looks (95%), so an
    seeds = [200, 201, 202, 203, 204]        # experiment designed after reading others can use seeds none read
    confirmatory = true                      # optional: its comparisons are the protocol's (``CONFIRMATORY``)
    axes = { "model.combine" = ["add", "concat_split"] }

    plugins = ["my_pe.py"]                   # (top level) the user's own schemes, combiners, tasks: files relative
                                             # to this file's folder, or dotted modules on the path (pelab.plugins);
                                             # run only when the command line confirms them

Seeds added in later rounds are the next integers after the largest listed seed, in order, so every arm's
seeds are a prefix of one sequence and stay paired. Axis keys are dotted paths into a run's config; an unknown
key fails with the list of valid ones. The same config reached from two grids is one run.
"""

from __future__ import annotations

import itertools
import math
import re
import stat
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pelab import plugins as plugin_code
from pelab.config import MAX_SEED, TASK_DECIDES, RunConfig, position_option_names, validation_message
from pelab.errors import PelabError, visible
from pelab.files import kind_of, nested_past, read_regular
from pelab.study.stats import flatten

TOP_KEYS = (
    "name", "description", "seeds", "task", "model", "train", "axes", "grid", "report", "pretrained", "sequential",
    "plugins",
)  # fmt: skip
#: ``[sequential]``: the cap on seeds per arm, the seeds each round adds, the alpha-spending function, and the
#: claims whose open comparisons buy seeds (default: every claim).
SEQUENTIAL_KEYS = ("max_seeds", "step", "spending", "claims")
#: A claim id as SCIENCE.md numbers them (``pelab.rounds`` checks it names a declared claim).
CLAIM_ID = re.compile(r"C[1-9][0-9]?")
SPENDINGS = ("obrien_fleming", "pocock")
#: The most seeds sequential rounds may give an arm: past this a seed count is no longer the question.
MAX_SEQUENTIAL_SEEDS = 100
#: What a [pretrained] table held while C9 trained outside the grids; refused, pointing at the C9 grids.
OLD_PRETRAINED_KEYS = ("seeds", "steps", "batch_size", "length", "d", "d_position", "n_layers", "n_heads", "lr")
REPORT_KEYS = {"floor": 0.8, "margin": 0.01}
GRID_KEYS = ("name", "set", "axes", "seeds", "confirmatory")
#: A confirmatory grid (SCIENCE.md, "Frozen protocols, fresh seeds"): ``confirmatory = true`` on a ``[[grid]]``. It
#: lists its own ``seeds``, a fixed count read once at 95% with no interim look (rounds never grow it), at least
#: ``MIN_CONFIRMATORY_SEEDS`` of them (every test against a margin needs 5), none of which the study's seeds, the
#: seeds its sequential rounds may add, or any other grid's own seeds use: seeds nobody has read. Those of the recorded
#: pilots (bench/pilots/) are kept apart by a test (tests/test_study.py), since a study file does not know them. Its
#: comparisons are confirmatory when read under the protocol fixed before they trained (``pelab.study.protocol``).
MIN_CONFIRMATORY_SEEDS = 5
#: A study file is a few kilobytes (the presets are under 10 KB).
MAX_STUDY_BYTES = 1 << 20
#: Tables and arrays inside one another: a study needs 4 (model.position.scheme in a list in a grid).
MAX_DEPTH = 16
MAX_NAME = 200
#: The largest preset has about 1,000 runs, and validating a run takes a few milliseconds: 20,000 is about a minute
#: of checking, and more runs than any study here trains.
MAX_RUNS = 20_000


def settable_keys() -> list[str]:
    """Every dotted path a study may set or vary."""

    def walk(prefix: str, cls: type[BaseModel]) -> list[str]:
        out = []
        for name, f in cls.model_fields.items():
            if prefix == "model." and name in TASK_DECIDES:
                continue
            if name == "position":  # pelab's schemes' options and those of plugins loaded since
                out += [f"{prefix}position.scheme"] + [f"{prefix}position.{k}" for k in position_option_names()]
            elif isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
                out += walk(f"{prefix}{name}.", f.annotation)
            elif name not in ("seed", "plugins"):  # a run's plugins are pelab's to record, not a setting
                out.append(prefix + name)
        return out

    return walk("", RunConfig)


@dataclass
class Grid:
    name: str
    fixed: dict[str, Any]
    axes: dict[str, list[Any]]
    #: the grid's own seeds (``[[grid]] seeds``): its arms train exactly these, whatever the study's seeds and
    #: rounds; None: the study's
    seeds: list[int] | None = None
    #: ``confirmatory = true``: its comparisons are read as the protocol's confirmatory test (GRID_KEYS' note)
    confirmatory: bool = False


@dataclass(frozen=True)
class Sequential:
    """A study that asks for a decision instead of a seed count (``[sequential]``): its ``seeds`` are the first
    round; each later round adds ``step`` seeds to the arms of comparisons still open, up to ``max_seeds``."""

    max_seeds: int
    step: int = 2
    spending: str = "obrien_fleming"
    #: the claims whose still-open comparisons add seeds; empty: every claim's. Comparisons of other claims are
    #: read under the same design all the same (at the nominal level of the looks their arms had), which can only
    #: make them more conservative: a look spends alpha whether or not it led to more seeds.
    claims: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_seeds": self.max_seeds, "step": self.step, "spending": self.spending}
        return {**out, "claims": list(self.claims)} if self.claims else out

    def buys_seeds(self, claim: str) -> bool:
        """Whether an open comparison of ``claim`` adds seeds to its arms."""
        return not self.claims or claim in self.claims


def seed_sequence(seeds: list[int], n: int) -> list[int]:
    """The first ``n`` seeds of an arm in a sequential study: the listed seeds, then the next integers after the
    largest of them, in order (deterministic: a seed added in round r is the same whenever it is added)."""
    extra = n - len(seeds)
    return list(seeds[:n]) + [max(seeds) + 1 + i for i in range(max(extra, 0))]


def _seeds(key: str, seeds: Any, least: int = 1) -> list[int]:
    """A list of seeds (the study's or a grid's own), checked; ``least``: how many it needs."""
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_SEED for s in seeds)
    ):
        raise PelabError(f"{key}: must be a non-empty list of integers in 0..{MAX_SEED} (got {seeds!r})")
    if len(set(seeds)) != len(seeds):
        raise PelabError(f"{key}: a seed is listed twice (got {seeds!r})")
    if len(seeds) < least:
        raise PelabError(f"{key}: needs at least {least} seeds, for an interval (got {seeds!r})")
    return list(seeds)


def _sequential(table: Any, seeds: list[int]) -> Sequential | None:
    """``[sequential]``, checked: one line naming the key and what it allows."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise PelabError("sequential: must be a table, e.g. [sequential] max_seeds = 12, step = 2")
    _check_keys("sequential", list(table), list(SEQUENTIAL_KEYS))
    if "max_seeds" not in table:
        raise PelabError("sequential.max_seeds: required (the cap on seeds per arm), e.g. max_seeds = 12")

    def whole(key: str, lo: int, hi: int) -> int:
        v = table[key]
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise PelabError(f"sequential.{key}: must be an integer in {lo}..{hi} (got {v!r})")
        return v

    if len(seeds) < 2:
        raise PelabError(f"seeds: a sequential study starts with at least 2 seeds (got {seeds!r})")
    cap = whole("max_seeds", len(seeds), MAX_SEQUENTIAL_SEEDS)
    step = whole("step", 1, MAX_SEQUENTIAL_SEEDS) if "step" in table else 2
    spending = table.get("spending", "obrien_fleming")
    if spending not in SPENDINGS:
        raise PelabError(f"sequential.spending: unknown value {spending!r}; allowed: {', '.join(SPENDINGS)}")
    if max(seeds) + cap - len(seeds) > MAX_SEED:
        raise PelabError(f"sequential.max_seeds: the added seeds would pass {MAX_SEED} (largest seed {max(seeds)})")
    claims = table.get("claims", [])
    if (
        not isinstance(claims, list)
        or not claims
        and "claims" in table
        or not all(isinstance(c, str) and CLAIM_ID.fullmatch(c) for c in claims)
        or len(set(claims)) != len(claims)
    ):
        raise PelabError(
            f'sequential.claims: must be a non-empty list of distinct claim ids, e.g. ["C2", "C6"] (got {claims!r})'
        )
    return Sequential(cap, step, spending, tuple(claims))


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
    #: arms (``RunConfig.arm_id``) of grids with their own seeds, and those seeds: sequential rounds leave them
    #: as they are, and their comparisons are read without interim looks
    fixed: dict[str, list[int]] = field(default_factory=dict)
    #: ``[sequential]``: seeds added in rounds until each comparison is decided; None: a fixed seed count
    sequential: Sequential | None = None
    #: the plugins the study's runs need (``pelab.plugins.Plugin.record``): those its file names and those its
    #: runs' classes come from; recorded with the study folder, so a report reads the same code
    plugins: list[dict[str, Any]] = field(default_factory=list)

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
            f"pretrained: C9's runs are ordinary [[grid]]s of the study now (task wordlm); remove {old[0]!r} "
            "from the [pretrained] table (it only names models to compare) and copy the C9 grids from "
            "pelab/presets/full.toml"
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


def _check_depth(raw: dict[str, Any]) -> None:
    """Refuse values nested past MAX_DEPTH, naming where."""
    where = nested_past(raw, MAX_DEPTH)
    if where is not None:
        raise PelabError(f"{where.split('[')[0]}: nested more than {MAX_DEPTH} tables or arrays deep")


def study_seeds(seeds: list[int], sequential: Sequential | None) -> list[int]:
    """Every seed the study's own arms may train: its ``seeds`` and, with ``[sequential]``, those its rounds may add."""
    return seed_sequence(seeds, sequential.max_seeds) if sequential else list(seeds)


def _check_confirmatory(grids: list[Grid], seeds: list[int], sequential: Sequential | None) -> None:
    """A confirmatory grid lists its own seeds (at least MIN_CONFIRMATORY_SEEDS), none of which the study's arms (its
    seeds and rounds) or any other grid's own seeds use, save confirmatory grids on exactly the same seeds (one test
    over several grids): one line naming the grid and the seeds that clash."""
    for g in grids:
        if not g.confirmatory:
            continue
        if g.seeds is None:
            raise PelabError(
                f"grid {g.name!r} confirmatory: a confirmatory grid lists its own seeds, a fixed count read once at "
                "95% that no other grid or the study trains; add seeds = [...] (e.g. 200 to 229)"
            )
        if len(g.seeds) < MIN_CONFIRMATORY_SEEDS:
            raise PelabError(
                f"grid {g.name!r} confirmatory: needs at least {MIN_CONFIRMATORY_SEEDS} seeds (every test against a "
                f"margin does), got {len(g.seeds)}"
            )
        what = "the study's seeds" + (" or the seeds its rounds may add" if sequential else "")
        others = dict.fromkeys(study_seeds(seeds, sequential), what)
        for other in grids:
            # confirmatory grids on the very same seeds are one test laid out over several grids (add at concat_wide's
            # width is a grid of its own, and its seeds pair with concat_wide's): only another list may clash
            same_test = other.confirmatory and other.seeds is not None and set(other.seeds) == set(g.seeds)
            if other is not g and other.seeds is not None and not same_test:
                others.update({s: f"grid {other.name!r}" for s in other.seeds})
        clash = sorted(set(g.seeds) & set(others))
        if clash:
            who = ", ".join(dict.fromkeys(others[s] for s in clash))
            raise PelabError(
                f"grid {g.name!r} confirmatory: its seeds must be fresh, but {clash[:5]}"
                f"{' …' if len(clash) > 5 else ''} are also trained by {who}"
            )


def seeds_used(study: Study) -> set[int]:
    """Every seed the study names or may train: its own seeds, those its rounds may add, every grid's own."""
    return set(study_seeds(study.seeds, study.sequential)) | {s for g in study.grids for s in (g.seeds or [])}


def confirmatory_clashes(study: Study, others: dict[str, Study]) -> list[str]:
    """Each confirmatory grid of ``study`` whose seeds some run of another study (``others``: name -> study, e.g.
    every preset and every recorded pilot) may also train, in words: "full: grid 'C10 confirmatory' shares seeds
    [200] with pilot quick". [] when every confirmatory grid's seeds are fresh."""
    out = []
    for g in study.grids:
        if not g.confirmatory or g.seeds is None:
            continue
        for name, other in others.items():
            shared = sorted(set(g.seeds) & seeds_used(other))
            if shared:
                out.append(f"{study.name}: grid {g.name!r} shares seeds {shared[:5]} with {name}")
    return out


def _grid_runs(study: Study) -> tuple[int, str]:
    """How many runs the grids expand to before deduplication, and the biggest grid's sizes in words."""
    base = flatten(study.base, "")
    total, largest, words = 0, -1, ""
    most = study.sequential.max_seeds if study.sequential else len(study.seeds)
    for g in study.grids:
        seeds = len(g.seeds) if g.seeds is not None else most
        lr = {**base, **g.fixed}.get("train.lr")
        rates = len(lr) if isinstance(lr, list) else 1
        n = math.prod(len(v) for v in g.axes.values()) * seeds * rates
        total += n
        if n > largest:
            sizes = " x ".join(str(len(v)) for v in g.axes.values()) or "1"
            largest, words = n, f"grid {g.name!r}: {sizes} points x {seeds} seeds"
            words += f" x {rates} rates" if rates > 1 else ""
    return total, words


def _plugin_entries(value: Any) -> list[str]:
    """``plugins = ["my_pe.py", "mylab.encodings"]``, checked for form only."""
    if value is None:
        return []
    ok = isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value)
    if not ok:
        raise PelabError(
            'plugins: must be a non-empty list of plugin files or dotted modules, e.g. ["my_pe.py"] '
            f"(got {value!r:.60})"
        )
    names = [plugin_code.module_name(v) for v in value]
    twice = [v for v, n in zip(value, names, strict=True) if names.count(n) > 1]
    if twice:
        raise PelabError(f"plugins: {twice[0]!r} is listed twice (or two plugins share its module name)")
    return list(value)


def _study_plugins(
    entries: list[str], source: str, trust: bool, recorded: list[dict[str, Any]] | None
) -> list[plugin_code.Source]:
    """The code a study's ``plugins`` name, read but not run: the files (relative to the study file's folder) or
    modules, or, for a study text stored in a study folder, what the folder recorded for them."""
    if recorded is None:
        base = Path(source).parent if source else None
        return [plugin_code.resolve(e, base) for e in entries]
    kept = {str(r.get("name")): r for r in recorded}
    out = []
    for e in entries:
        record = kept.get(plugin_code.module_name(e))
        if record is None:
            raise PelabError(f"plugins: the stored study names {e}, but its folder recorded no such plugin")
        out.append(plugin_code.from_record(record) if trust else plugin_code.Source(
            e, str(record["name"]), str(record.get("file")), str(record.get("sha256")), None))  # fmt: skip
    return out


def parse_study(
    text: str, source: str = "", trust: bool = False, recorded: list[dict[str, Any]] | None = None
) -> Study:
    """Parse and fully validate a study (every run is constructed), or raise one PelabError.

    A study that names plugins needs them loaded, each with the code it names (``pelab.plugins.gate``): loaded
    from the command line already, or run now when ``trust`` (``--trust-plugins``); otherwise the one-line error
    says how to confirm them and none of their code has run. ``recorded``: the plugins a study folder recorded
    beside this text (``Store.study``), which stand for files the stored text names relative to a folder it no
    longer knows."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PelabError(f"study file: not valid TOML ({e})") from None
    except RecursionError:
        raise PelabError("study file: arrays or tables nested too deep for TOML to read") from None
    if not raw:
        raise PelabError("study file: holds no settings; start from a copy of pelab/presets/quick.toml")
    _check_depth(raw)
    pretrained_models = _pretrained_models(raw.get("pretrained"))
    _check_keys("study", list(raw), list(TOP_KEYS))
    entries = _plugin_entries(raw.get("plugins"))
    what = "the study folder" if recorded is not None else Path(source).name if source else "the study"
    plugin_code.gate(_study_plugins(entries, source, trust, recorded), trust, what)
    allowed = settable_keys()
    base: dict[str, Any] = {}
    for section in ("task", "model", "train"):
        value = raw.get(section, {})
        if not isinstance(value, dict):
            raise PelabError(f"{section}: must be a table of settings")
        flat = flatten(value, f"{section}.")
        # an empty table header such as [model.position] sets nothing
        flat = {k: v for k, v in flat.items() if not (v == {} and any(a.startswith(f"{k}.") for a in allowed))}
        _check_keys(section, list(flat), allowed)
        for k, v in flat.items():
            _set_dotted(base, k, v)
    seeds = _seeds("seeds", raw.get("seeds", [0, 1, 2]))
    sequential = _sequential(raw.get("sequential"), seeds)
    for key, most in (("name", MAX_NAME), ("description", 20 * MAX_NAME)):
        if key in raw and (not isinstance(raw[key], str) or len(raw[key]) > most):
            raise PelabError(f"{key}: must be a string of at most {most} characters")
    if not isinstance(raw.get("grid", []), list):
        raise PelabError("grid: write each grid as a [[grid]] table with name, set and axes")
    if not isinstance(raw.get("axes", {}), dict):
        raise PelabError('axes: must be a table of keys to lists of values, e.g. axes = { "model.d" = [16, 32] }')
    raw_grids = list(raw.get("grid", []))
    if "axes" in raw:
        raw_grids.insert(0, {"name": "main", "axes": raw["axes"]})
    if not raw_grids:
        raw_grids = [{"name": "main", "axes": {}}]
    grids = []
    for i, g in enumerate(raw_grids):
        if not isinstance(g, dict):
            raise PelabError("grid: each [[grid]] must be a table with name, set and axes")
        name = g.get("name", f"grid {i + 1}")
        if not isinstance(name, str) or len(name) > MAX_NAME:
            raise PelabError(f"grid: each grid's name must be a string of at most {MAX_NAME} characters")
        _check_keys(f"grid {name!r}", list(g), list(GRID_KEYS))
        fixed, axes = g.get("set", {}), g.get("axes", {})
        for key, value in (("set", fixed), ("axes", axes)):
            if not isinstance(value, dict):
                raise PelabError(f'grid {name!r} {key}: must be a table of dotted keys, e.g. {{ "model.d" = 32 }}')
        _check_keys(f"grid {name!r} set", list(fixed), allowed)
        _check_keys(f"grid {name!r} axes", list(axes), allowed)
        for k, v in axes.items():
            if not isinstance(v, list) or not v:
                raise PelabError(f"axes: {k!r} must be a non-empty list of values (got {v!r})")
        own = _seeds(f"grid {name!r} seeds", g["seeds"], least=2) if "seeds" in g else None
        confirmatory = g.get("confirmatory", False)
        if not isinstance(confirmatory, bool):
            raise PelabError(f"grid {name!r} confirmatory: must be true or false (got {confirmatory!r})")
        grids.append(Grid(name, dict(fixed), {k: list(v) for k, v in axes.items()}, own, confirmatory))
    _check_confirmatory(grids, seeds, sequential)
    report = raw.get("report", {})
    if not isinstance(report, dict):
        raise PelabError("report: must be a table with floor and margin")
    _check_keys("report", list(report), list(REPORT_KEYS))
    for k, v in report.items():
        if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v < 1:
            raise PelabError(f"report.{k}: must be a number in [0, 1) (got {v!r})")
    study = Study(
        report={**REPORT_KEYS, **{k: float(v) for k, v in report.items()}},
        name=str(raw.get("name", visible(Path(source).stem) if source else "study")),  # a stem's 0xff as \xff
        description=str(raw.get("description", "")),
        seeds=list(seeds),
        base=base,
        grids=grids,
        source=text,
        pretrained_models=pretrained_models,
        sequential=sequential,
    )
    runs, largest = _grid_runs(study)
    if runs > MAX_RUNS:
        raise PelabError(
            f"grid: the study expands to {runs:,} runs ({largest}), past pelab's bound of {MAX_RUNS:,}; "
            "shorten its axes or seeds, or split it into several studies"
        )
    expand(study)
    used = {p for r in study.runs for p in (r.plugins or {})} | {plugin_code.module_name(e) for e in entries}
    study.plugins = plugin_code.records_for(used)
    return study


def expand(study: Study) -> None:
    """Fill ``study.runs``: every grid point x seed, validated, deduplicated by run id."""
    runs: dict[str, RunConfig] = {}
    membership: dict[str, list[str]] = {}
    tuned: set[str] = set()
    arm_seeds: dict[str, tuple[Grid, frozenset[int] | None]] = {}  # arm -> its first grid, that grid's own seeds
    for g in study.grids:
        keys = list(g.axes)
        if "train.lr" in g.axes and any(isinstance(v, list) for v in g.axes["train.lr"]):
            raise PelabError(f"grid {g.name!r} axes: 'train.lr' values must be numbers (a list in set or [train] "
                             "makes the rate a nuisance parameter instead)")  # fmt: skip
        for values in itertools.product(*(g.axes[k] for k in keys)):
            point = dict(zip(keys, values, strict=True))
            settings = {**flatten(study.base, ""), **g.fixed, **point}
            rates = _rates(f"grid {g.name!r}: ", settings.get("train.lr"))
            for seed, lr in itertools.product(g.seeds or study.seeds, rates or [None]):
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
                own = None if g.seeds is None else frozenset(g.seeds)
                first, seen = arm_seeds.setdefault(cfg.arm_id, (g, own))
                if seen != own:
                    theirs = "the study's seeds" if first.seeds is None else f"its own seeds {first.seeds}"
                    raise PelabError(
                        f"grid {g.name!r}: an arm of it is also in grid {first.name!r}, which gives it {theirs}; an "
                        "arm trains one list of seeds (change a setting of one grid so the arms differ, or give both "
                        "the same seeds)"
                    )
                runs.setdefault(cfg.run_id, cfg)
                membership.setdefault(cfg.run_id, [])
                if g.name not in membership[cfg.run_id]:
                    membership[cfg.run_id].append(g.name)
                if lr is not None:
                    tuned.add(cfg.run_id)
    study.runs = list(runs.values())
    study.membership = membership
    study.tuned = tuned
    study.fixed = {arm: list(g.seeds) for arm, (g, _) in arm_seeds.items() if g.seeds is not None}


def with_seeds(study: Study, counts: dict[str, int]) -> Study:
    """A copy of ``study`` whose arms (``RunConfig.arm_id``) named in ``counts`` have that many seeds
    (``seed_sequence``): a sequential round's runs. Arms not named keep the study's seeds; arms of a grid with its
    own seeds (``Study.fixed``) keep those, whatever ``counts`` says."""
    runs = {r.run_id: r for r in study.runs}
    membership = {k: list(v) for k, v in study.membership.items()}
    tuned = set(study.tuned)
    for cfg in study.runs:
        n = counts.get(cfg.arm_id, 0)
        if cfg.arm_id in study.fixed or cfg.seed != study.seeds[0] or n <= len(study.seeds):
            continue
        for seed in seed_sequence(study.seeds, n)[len(study.seeds) :]:
            new = cfg.model_copy(update={"seed": seed})
            runs.setdefault(new.run_id, new)
            membership.setdefault(new.run_id, list(study.membership.get(cfg.run_id, [])))
            if cfg.run_id in study.tuned:
                tuned.add(new.run_id)
    return replace(study, runs=list(runs.values()), membership=membership, tuned=tuned)


def load_study(path: str | Path, trust: bool = False) -> Study:
    """The study in the file at ``path`` (a link to one is followed: the user named it), read whole and validated.
    A folder, a FIFO, a device (a link to /dev/zero) or a file past ``MAX_STUDY_BYTES`` is refused in one line
    that says which, without blocking or reading it. ``trust``: run the plugins it names (``--trust-plugins``)."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise PelabError(f"study: no such file {str(path)!r}") from None
    except OSError as e:
        raise PelabError(f"study: cannot read {str(path)!r} ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise PelabError(f"study: {str(path)!r} is a directory; give the study file (TOML) itself")
    if not stat.S_ISREG(st.st_mode):
        raise PelabError(
            f"study: {str(path)!r} is {kind_of(st.st_mode)}, not a study file; give the study file (TOML) itself"
        )
    if st.st_size > MAX_STUDY_BYTES:
        raise PelabError(f"study: {str(path)!r} is larger than {MAX_STUDY_BYTES:,} bytes; a study file is a few KB")
    try:
        data = read_regular(path, MAX_STUDY_BYTES, follow=True)  # never blocks, should a FIFO take its place
    except (OSError, ValueError) as e:
        raise PelabError(f"study: cannot read {str(path)!r} ({getattr(e, 'strerror', None) or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PelabError(
            f"study: {str(path)!r} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None
    study = parse_study(text, str(path), trust=trust)
    if study.pretrained_models:  # every folder read and checked (one line, exit 2) before any run
        from pelab.weights.hf import load_all

        load_all(study.pretrained_models)
    return study
