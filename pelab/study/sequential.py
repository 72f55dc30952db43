"""Sequential seeds: a group-sequential design, so a study can ask for a decision instead of a seed count.

A study starts every comparison on a few seeds (5 where an equivalence is tested), reads its verdicts, and adds
seeds, in rounds, only to the arms of comparisons still undecided, up to a cap (SCIENCE.md, "Sequential seeds").
Looking at the data after every round and stopping when an interval decides would inflate the error rate if each
look were read at 95%. The method, standard and stated:

* **Alpha spending** (Lan & DeMets 1983). The error rate alpha is spent over the *information fraction*
  t = n / n_max (seeds so far over the cap), by a spending function: O'Brien–Fleming-type by default,
  alpha(t) = 2 − 2 Φ(z_{1−alpha/2} / √t), which spends almost nothing at early looks and keeps the last look close
  to the fixed-sample test; or Pocock-type, alpha(t) = alpha · ln(1 + (e − 1) t), which spends evenly. Since
  spending is a function of t, the looks need not be planned: the boundaries are computed for the looks actually
  taken (any seed counts, any number of them).
* **Boundaries.** For looks t_1 < … < t_K the boundary c_k of look k solves P(no crossing before k, crossing at
  k) = alpha(t_k) − alpha(t_{k−1}) under "no difference": two-sided (|T| ≥ c, the directional test) for the
  rules, one-sided available (each half of an equivalence's two one-sided tests) for the z boundaries.
* **Small numbers of seeds: t, not z.** A comparison is read on the paired Student t-statistic, n_k − 1 degrees of
  freedom. The textbook conversion, matching each z boundary's nominal p-value at n_k − 1 degrees of freedom, is
  liberal at 5 to 12 seeds (5.5% at a nominal 5%, measured on 400 000 simulated studies), so pelab spends alpha on
  the t-statistics themselves (``t_boundaries``): their joint null law is free of the unknown variance, so it is
  simulated once per set of looks, exactly (block sums and χ² sums of squares; 200 000 paths, fixed seed: every
  rerun reads the same levels), and c_k is the quantile at which the share of paths first crossing at look k is the
  spending function's increment, less two simulation standard errors so the simulation's own error errs
  conservative. The first look is the plain t-test, exactly. Each boundary gives the look's *nominal* level,
  alpha_k = 2 P(T_{n_k − 1} ≥ c_k), and the look is read on its t-interval at 1 − alpha_k. ``boundaries`` (z, by
  the recursive numerical integration of Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19) gives
  the large-sample boundaries the tests check against published tables.
* **Every rule reads one kind of interval.** The nominal intervals are *repeated confidence intervals*
  (Jennison & Turnbull 1989): with two-sided boundaries they cover the true difference at every look at once with
  probability ≥ 1 − alpha. Every verdict of ``pelab.rules`` is read off an interval (it excludes 0; it lies
  inside or outside the margin), so the directional test and the equivalence test (two one-sided tests, each at
  alpha / 2, as the fixed rule's 95% interval inside the margin is) keep their error rates over all looks alike.
* **Several comparisons.** Holm–Bonferroni still runs across a claim's comparisons: a step at level a reads each
  comparison at ``nominal_alpha(a, looks)``, the design's nominal level at its last look for total error a
  (``adjusted_p`` is the same as a p-value, for ranking).

A comparison that is decided stops taking seeds, so its last look is the one that decided it; one still open at the
cap is read at the cap with the whole alpha spent. With no design (a fixed seed count) none of this applies and
the rules read plain 95% intervals as before.

* **Overrunning data** (SCIENCE.md, "Every seed counts"). A comparison stopped at look k may still see its arms get
  seeds at later looks, bought by another open comparison that reads one of them. Its verdict reads *all* of them:
  the t-interval of every paired seed (n − 1 degrees of freedom) at the nominal level of look k, the look it stopped
  at (``Looks.overrun`` records how many seeds that reading holds), and the decision stands only where that reading
  decides it the same way as the stop did; otherwise it is "decided early, not confirmed"
  (``rules.families.decide``). It is a conservative variant of the deletion method for overrunning (Whitehead 1992,
  "Overrunning and underrunning in sequential clinical trials", Controlled Clinical Trials 13; Hall & Liu 2002,
  Biometrika 89, on inference after overrunning): the deletion method replaces the stopping look by the one with the
  overrun data, at the same boundary; pelab asks both to cross it. Every decision so declared is a decision the
  design itself took at look k, so the error rate stays at most the design's (tests/test_sequential.py simulates it).

For the driver: ``schedule(start, cap, step)`` gives the rounds; after each, ``still_open(rows, cap)`` and
``arms_to_extend(rows, cap)`` name the comparisons still undecided and the arms they read (``rows``: claims.json row
records, which carry their paired ``seeds``). A comparison's ``Looks`` lists *every* seed count it was examined at,
in order, including rounds where its arms got seeds because another comparison that shares an arm needed them:
repeated confidence intervals stay valid whatever the reason a look was taken or a comparison went on, as long as
each look is counted (``Looks.record`` / ``from_record`` store it). The report then builds each ``Comparison`` with
its ``looks``; ``method_line()`` is the sentence for the report's method line.

Everything here is pure NumPy/SciPy (no torch), so the driver and the report both import it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from scipy import optimize
from scipy import stats as st

Spending = Literal["obrien_fleming", "pocock"]
#: Grid points per unit of standard deviation in the numerical integration (error well below 1e-5 in alpha).
GRID_PER_SD = 60
#: How far out the grid reaches, in standard deviations, where a one-sided boundary has no lower side.
GRID_REACH = 8.0


#: How each spending function is named in the report.
SPENDING_NAMES: dict[str, str] = {"obrien_fleming": "O'Brien–Fleming", "pocock": "Pocock"}


def method_line(spending: Spending = "obrien_fleming") -> str:
    """The one-line method description the report puts on its method line, naming the study's own ``spending``."""
    return (
        f"sequential seeds: Lan–DeMets alpha spending ({SPENDING_NAMES[spending]}-type, the study's "
        "[sequential] spending) over the looks taken (information = seeds / cap), "
        "boundaries on the paired t-statistics (n − 1 degrees of freedom), each interval read at its last look's "
        "nominal level as a repeated confidence interval, for directional and equivalence (two one-sided) tests "
        "alike; a comparison stopped at an interim look whose arms later got seeds for other comparisons is read on "
        "all its seeds at the nominal level of the look it stopped at, and its decision stands only where that "
        "reading agrees (else 'decided early, not confirmed': a conservative variant of the deletion method for "
        "overrunning, Whitehead 1992)"
    )


# --- spending ---------------------------------------------------------------------------
def spent(alpha: float, t: float, spending: Spending = "obrien_fleming") -> float:
    """alpha(t): the error rate spent by information fraction ``t`` (0 at t = 0, ``alpha`` at t ≥ 1)."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    if spending == "obrien_fleming":
        return float(2 - 2 * st.norm.cdf(st.norm.isf(alpha / 2) / math.sqrt(t)))
    if spending == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * t))
    raise ValueError(f"unknown spending function {spending!r}; known: obrien_fleming, pocock")


def fractions(looks: Sequence[int], cap: int) -> tuple[float, ...]:
    """Information fractions n_k / cap of the looks taken; a look past the cap counts as the cap."""
    if not looks or cap < 1:
        raise ValueError(f"need at least one look and a cap ≥ 1 (looks {list(looks)}, cap {cap})")
    if any(b <= a for a, b in zip(looks, looks[1:], strict=False)):
        raise ValueError(f"looks must be strictly increasing seed counts, got {list(looks)}")
    return tuple(min(n / cap, 1.0) for n in looks)


# --- boundaries -------------------------------------------------------------------------
def _grid(lo: float, hi: float, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Points and Simpson weights on [lo, hi] (an odd number of points, at least GRID_PER_SD per sd)."""
    n = max(int(math.ceil((hi - lo) / sd * GRID_PER_SD)), 50) | 1
    x = np.linspace(lo, hi, n)
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return x, w * (hi - lo) / (n - 1) / 3


def _crossing(c: float, t: float, sd: float, density: tuple[np.ndarray, np.ndarray], sides: int) -> float:
    """P(no crossing before, crossing at this look) for boundary ``c`` at fraction ``t``, from the weighted
    sub-density of S at the last look (points, density × weights) and the increment's sd."""
    s, f = density
    b = c * math.sqrt(t)
    up = st.norm.sf((b - s) / sd)
    down = st.norm.cdf((-b - s) / sd) if sides == 2 else 0.0
    return float(np.sum(f * (up + down)))


def _excess(c: float, t: float, sd: float, density: tuple[np.ndarray, np.ndarray], sides: int, step: float) -> float:
    """How far boundary ``c`` overspends this look's share of alpha (the root is the boundary)."""
    return _crossing(c, t, sd, density, sides) - step


def _carry(
    c: float, t: float, sd: float, density: tuple[np.ndarray, np.ndarray] | None, sides: int
) -> tuple[np.ndarray, np.ndarray]:
    """The weighted sub-density of S_k = Z_k √t_k on its continuation region (|S| < c√t, or S < c√t one-sided):
    the last one convolved with the increment's normal density."""
    b = c * math.sqrt(t)
    lo = -b if sides == 2 else -GRID_REACH * math.sqrt(t)
    x, w = _grid(lo, b, math.sqrt(t))
    if density is None:
        fx = st.norm.pdf(x, scale=math.sqrt(t))
    else:
        s, f = density
        fx = (st.norm.pdf((x[:, None] - s[None, :]) / sd) / sd) @ f
    return x, fx * w


@lru_cache(maxsize=4096)
def boundaries(
    ts: tuple[float, ...], alpha: float, spending: Spending = "obrien_fleming", sides: int = 2
) -> tuple[float, ...]:
    """The z-boundaries c_1..c_K of the looks at information fractions ``ts`` for total error ``alpha``:
    two-sided (reject "no difference" when |Z_k| ≥ c_k) or one-sided (Z_k ≥ c_k). A look that may spend nothing
    (repeated information) gets an infinite boundary. Pure; cached, since a report asks for the same looks often."""
    if sides not in (1, 2):
        raise ValueError("sides is 1 or 2")
    out: list[float] = []
    density: tuple[np.ndarray, np.ndarray] | None = None
    t_prev, spent_prev = 0.0, 0.0
    for t in ts:
        step = spent(alpha, t, spending) - spent_prev
        if step <= 1e-15 or t <= t_prev:
            out.append(math.inf)
            continue
        sd = math.sqrt(t - t_prev)
        if density is None:  # the first look: Z_1 ~ N(0, 1)
            c = float(st.norm.isf(step / sides))
        elif _crossing(0.0, t, sd, density, sides) <= step:
            c = 0.0
        else:
            c = float(optimize.brentq(_excess, 0.0, 40.0, args=(t, sd, density, sides, step), xtol=1e-10))
        density = _carry(c, t, sd, density, sides)
        out.append(c)
        t_prev, spent_prev = t, spent_prev + step
    return tuple(out)


def nominal_alphas(
    looks: Sequence[int], cap: int, alpha: float, spending: Spending = "obrien_fleming", sides: int = 2
) -> tuple[float, ...]:
    """The nominal level of each look on the z scale: the p-value at which its boundary lies (2(1 − Φ(c))
    two-sided, 1 − Φ(c) one-sided); what p-matching would read at n_k − 1 degrees of freedom (see ``t_boundaries``
    for why pelab does not)."""
    cs = boundaries(fractions(looks, cap), alpha, spending, sides)
    return tuple(float(sides * st.norm.sf(c)) for c in cs)


# --- boundaries for the paired t-statistics ---------------------------------------------------
#: Null paths on which the t-boundaries are computed, and their fixed seed (so every rerun reads the same levels).
T_PATHS = 200_000
T_SEED = 20_261_125
#: The total alphas at which ``adjusted_p``'s table is computed exactly: every Holm level of a family of up to 60
#: comparisons at alpha = 0.05 (so Holm's decisions are exact there), and a log grid between 1e-6 and 0.5.
TABLE_ALPHAS = tuple(sorted({*(0.05 / j for j in range(1, 61)), *np.geomspace(1e-6, 0.5, 61).tolist()}))


@lru_cache(maxsize=32)  # float32: 0.8 MB a look, so at most a few tens of MB held
def null_t(looks: tuple[int, ...]) -> np.ndarray:
    """|T_1|..|T_K| of the paired t-statistic at each look on T_PATHS paths under "no difference", shape (K, paths).

    Their joint law is free of the unknown variance, so it is simulated once per set of looks, exactly: each block
    of m new seeds contributes a sum ~ N(0, m) and a within-block sum of squares ~ χ²(m − 1), independent for normal
    data, pooled with the earlier seeds (SS = SS₁ + SS₂ + n₁n₂/(n₁ + n₂)·(mean₁ − mean₂)²)."""
    if looks[0] < 2:
        raise ValueError(f"a t-statistic needs at least 2 seeds at the first look, got {looks[0]}")
    rng = np.random.default_rng([T_SEED, *looks])
    total, ss, prev = np.zeros(T_PATHS), np.zeros(T_PATHS), 0
    out = np.empty((len(looks), T_PATHS), dtype=np.float32)
    for k, n in enumerate(looks):
        m = n - prev
        block = rng.standard_normal(T_PATHS) * math.sqrt(m)
        within = rng.chisquare(m - 1, T_PATHS) if m > 1 else np.zeros(T_PATHS)
        ss = within if prev == 0 else ss + within + prev * m / n * (total / prev - block / m) ** 2
        total, prev = total + block, n
        out[k] = np.abs(total / n) / np.sqrt(ss / (n - 1) / n)
    out.setflags(write=False)
    return out


def _allowed(alpha: float, ts: Sequence[float], spending: Spending) -> list[int]:
    """How many of the T_PATHS null paths may have crossed by each look: alpha(t_k) · paths less two of its
    binomial standard errors, rounded down, so that the simulation's own error makes the design conservative
    (the true rate is below alpha(t_k) unless the simulation erred by more than 2 SE) rather than liberal."""
    out = []
    for t in ts:
        expected = spent(alpha, t, spending) * T_PATHS
        out.append(max(int(math.floor(expected - 2 * math.sqrt(expected * (1 - expected / T_PATHS)) + 1e-9)), 0))
    return out


@lru_cache(maxsize=4096)
def t_boundaries(
    looks: tuple[int, ...], cap: int, alpha: float, spending: Spending = "obrien_fleming"
) -> tuple[float, ...]:
    """Two-sided boundaries c_k on |T_k| (the paired t-statistic with n_k − 1 degrees of freedom) for total error
    ``alpha`` spent by ``spending`` over the looks taken: the first crossing happens at look k on a share
    alpha(t_k) − alpha(t_{k−1}) of the null paths (``null_t``), less twice the simulation's error (``_allowed``:
    4.90% of the paths at alpha = 5%), so the error rate is at most alpha. Matching nominal p-values of the
    z boundaries instead (the textbook conversion) gives 5.5% at 5 to 12 seeds (400 000 simulated studies), which
    is why pelab computes these. The first look is a plain t-test, so its boundary is the t quantile itself (a
    single look is exactly the fixed-seed test). A look that may spend nothing gets infinity."""
    paths, ts = null_t(looks), fractions(looks, cap)
    first = spent(alpha, ts[0], spending)  # the first look alone is a plain t-test: exact, no simulation error
    out = [float(st.t.isf(first / 2, looks[0] - 1)) if first > 0 else math.inf]
    alive = paths[0] < out[0]
    for k, allowed in enumerate(_allowed(alpha, ts, spending)[1:], start=1):
        r = allowed - (T_PATHS - int(alive.sum()))  # crossings this look may add
        values = paths[k][alive]
        if r <= 0:
            c = math.inf
        elif r >= values.size:
            c = 0.0
        else:
            c = float(np.partition(values, values.size - r)[values.size - r])  # the r-th largest: r cross
        alive &= paths[k] < c
        out.append(c)
    return tuple(out)


def nominal_alpha(alpha_total: float, looks: Sequence[int], cap: int, spending: Spending = "obrien_fleming") -> float:
    """The two-sided nominal alpha of the last look for total error ``alpha_total``: the level whose Student-t
    interval (n_K − 1 degrees of freedom) has the last look's t-boundary as its critical value. The rules read a
    comparison examined at ``looks`` on its interval at 1 − this; a Holm step at level a asks for
    ``nominal_alpha(a, looks, cap)``."""
    looks = tuple(looks)
    c = t_boundaries(looks, cap, float(alpha_total), spending)[-1]
    return float(2 * st.t.sf(c, looks[-1] - 1))


def t_critical(alpha_nominal: float, n: int) -> float:
    """The two-sided Student-t critical value at the nominal level with n − 1 degrees of freedom."""
    return float(st.t.isf(alpha_nominal / 2, n - 1))


@lru_cache(maxsize=256)
def _table(looks: tuple[int, ...], cap: int, spending: Spending) -> tuple[np.ndarray, np.ndarray]:
    """log alpha_total against log nominal alpha of the last look, at TABLE_ALPHAS, made non-decreasing."""
    alphas = np.array(TABLE_ALPHAS)
    nominal = np.array([nominal_alpha(a, looks, cap, spending) for a in TABLE_ALPHAS])
    nominal = np.maximum.accumulate(np.maximum(nominal, 1e-300))
    return np.log(alphas), np.log(nominal)


def adjusted_p(p: float, looks: Sequence[int], cap: int, spending: Spending = "obrien_fleming") -> float:
    """A fixed-sample two-sided p-value of the last look as the smallest total alpha at which the design would
    reject: ``adjusted_p(p) < a`` exactly when ``p < nominal_alpha(a)`` at every alpha of TABLE_ALPHAS (every Holm
    level at alpha = 5%), and by log-log interpolation between them. A p the design would not reject at
    alpha = 0.5 reads 1. Holm ranks and compares these, so a step at level a reads each comparison at its own
    nominal level. NaN stays NaN."""
    if math.isnan(p):
        return p
    if not p > 0:
        return 0.0
    log_alpha, log_nominal = _table(tuple(looks), cap, spending)
    if math.log(p) >= log_nominal[-1]:
        return 1.0
    if math.log(p) < log_nominal[0]:
        return float(np.exp(log_alpha[0] + math.log(p) - log_nominal[0]))
    # the smallest tabled alpha whose nominal exceeds p bounds it from above; interpolate below it
    i = int(np.searchsorted(log_nominal, math.log(p), side="right"))
    lo_n, hi_n, lo_a, hi_a = log_nominal[i - 1], log_nominal[i], log_alpha[i - 1], log_alpha[i]
    w = 0.0 if hi_n == lo_n else (math.log(p) - lo_n) / (hi_n - lo_n)
    return float(np.exp(lo_a + w * (hi_a - lo_a)))


# --- the design a comparison was examined under -------------------------------------------
@dataclass(frozen=True)
class Looks:
    """The seed counts a comparison was examined at, in order (its last look is the one that stands), and the cap.
    Carried by a ``rules.Test``: every interval the rules read from it is then at the last look's nominal level."""

    counts: tuple[int, ...]
    cap: int
    spending: Spending = "obrien_fleming"
    #: 0, or the paired seeds read past the last look counted here: a comparison stopped at that look whose arms got
    #: more seeds later (overrunning data) is read on all of them at that look's nominal level (module docstring)
    overrun: int = 0

    def __post_init__(self) -> None:
        fractions(self.counts, self.cap)  # validates
        if self.counts[0] < 2:
            raise ValueError(f"a look needs at least 2 paired seeds, got {self.counts[0]}")
        if self.overrun and self.overrun <= self.counts[-1]:
            raise ValueError(f"an overrun reads more seeds than its last look ({self.overrun} ≤ {self.counts[-1]})")
        spent(0.05, 1.0, self.spending)  # an unknown spending function fails here, by name

    def record(self) -> dict[str, Any]:
        """As a study's store keeps it (JSON), so a rebuilt report reads the same looks."""
        out = {"counts": list(self.counts), "cap": self.cap, "spending": self.spending}
        return {**out, "overrun": self.overrun} if self.overrun else out

    @classmethod
    def from_record(cls, d: Mapping[str, Any]) -> Looks:
        counts = tuple(int(n) for n in d["counts"])
        return cls(counts, int(d["cap"]), d.get("spending", "obrien_fleming"), int(d.get("overrun", 0)))

    def nominal(self, alpha_total: float) -> float:
        return nominal_alpha(alpha_total, self.counts, self.cap, self.spending)

    def nominal_level(self, level: float) -> float:
        """The confidence level of the interval to read for an overall ``level`` (0.95 → e.g. 0.9938)."""
        return 1 - self.nominal(1 - level)

    def adjusted(self, p: float) -> float:
        return adjusted_p(p, self.counts, self.cap, self.spending)

    def text(self) -> str:
        looks = f"looks at {', '.join(map(str, self.counts))} seeds of a cap of {self.cap}"
        if self.overrun:
            looks += f", stopped there; all {self.overrun} seeds its arms got read at that look's level"
        return looks


def schedule(start: int, cap: int, step: int) -> tuple[int, ...]:
    """The planned seed counts of the rounds: start, start + step, …, ending at the cap."""
    if not 2 <= start <= cap or step < 1:
        raise ValueError(f"need 2 ≤ start ≤ cap and step ≥ 1 (start {start}, cap {cap}, step {step})")
    counts = list(range(start, cap, step)) + [cap]
    return tuple(dict.fromkeys(counts))


# --- which comparisons still want seeds -----------------------------------------------------
#: The verdict of a comparison that an interval has not decided (``pelab.rules.verdicts.INCONCLUSIVE``; the study
#: layer does not import the report, a test keeps the two equal).
UNDECIDED = "inconclusive at this budget"


@dataclass(frozen=True)
class Arm:
    """One arm of an open comparison: where it sits, its label as the rows name it, and the runs it has so far
    (their configs, less the seed, are what the driver runs again with new seeds)."""

    where: tuple[tuple[str, str], ...]
    label: str
    runs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Open:
    """A comparison still open: its two arms and its paired seeds so far."""

    a: Arm
    b: Arm
    seeds: int


def _arm(row: Mapping[str, Any], side: str) -> Arm:
    place = tuple(sorted((str(k), str(v)) for k, v in dict(row.get("where", {})).items()))
    return Arm(place, str(row[side]), tuple(row.get(f"{side}_runs", ())))


def still_open(rows: Iterable[Mapping[str, Any]], cap: int, undecided: str = UNDECIDED) -> list[Open]:
    """The comparisons of a family (claims.json row records, ``report.tables.row_records``: they carry their
    paired ``seeds`` and each arm's runs) that are undecided and below the cap: only their arms get more seeds.
    A decided row, a row with no information (its arms at a ceiling: more seeds cannot help), a row whose arms
    did not learn and a row "decided early, not confirmed" (the design stopped it; seeds bought for another
    comparison did not bear it out, and buying it more would be a second trial on the same question) stop."""
    out = []
    for r in rows:
        seeds = int(r.get("seeds", 0))
        if r["verdict"] == undecided and seeds < cap:
            out.append(Open(_arm(r, "a"), _arm(r, "b"), seeds))
    return out


def arms_to_extend(rows: Iterable[Mapping[str, Any]], cap: int, undecided: str = UNDECIDED) -> list[Arm]:
    """The arms that the open comparisons read, each once (an arm two open comparisons share is run once), in
    first-seen order: what the driver adds seeds to in the next round."""
    arms: dict[tuple[Any, ...], Arm] = {}
    for o in still_open(rows, cap, undecided):
        for arm in (o.a, o.b):
            arms.setdefault((arm.where, arm.label, arm.runs), arm)
    return list(arms.values())
