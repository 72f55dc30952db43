"""The report's first screen, assembled from the verdicts and their rows (never written by hand per run).

* ``answer_sentences``: at most five answers on the question, one per central claim (C6 at the same width, C6's
  size control, C9, C7, C18), each built from that claim's rows (``claims.json`` rows: verdicts, intervals,
  resolutions): one plain sentence that counts (who won how often, how many were equal, how many stay open) and
  ends in a link to its section, then its numbers as short details under it (by how much the wins won, what the
  undecided intervals do establish: "undecided: they differ by at most 3.1 pp accuracy", which seeds failed). A
  reader gets the answer from the sentences alone; the one long sentence that carried every number read as a
  wall.
* ``overview_rows``: every add-against-concat comparison the claims made, once each, for the forest plot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import is_dataclass, replace
from types import SimpleNamespace
from typing import Any

from pelab.report.summary import PHRASE, join_and, size_text, span_text, win_facts
from pelab.rules import (
    LM_LEARNED_SHARE,
    LOG_MARGIN,
    NO_INFO,
    NOT_RUN,
    NOT_SUPPORTED,
    RELATIVE_MARGIN,
    SUPPORTED,
    TOO_SMALL,
    UNCONFIRMED,
    metric,
)

Rows = Sequence[Mapping[str, Any]]
#: Every add-against-concat family a claim produces, A the concatenating arm and B the adding one, in the order
#: the overview figure shows them: (claim, family, what the group is called).
OVERVIEW = (
    ("C6", "concat_split vs add", "same width"),
    ("C6", "concat_wide vs add at its width", "wider, against add at its width"),
    ("C9", "concat beats add", "frozen MiniLM vectors"),
    ("C13", "segments", "segment embeddings"),
    ("C14", "combiner", "digits"),
    ("C19", "concat vs add", "2-D rows and columns"),
)


#: C6's language-model tasks: their rows are the answer where it lives (``pelab.report.answer``: its sentences and its
#: picture open the first screen), so the sentences and the overview beside it read C6's other rows alone.
LM_TASKS = ("charlm", "mlm")


def is_lm_row(r: Mapping[str, Any]) -> bool:
    return str((r.get("where") or {}).get("task.name")) in LM_TASKS


def without_lm(claim: Any) -> Any:
    """C6 with its language-model rows left out (``LM_TASKS``); None when no other row is left."""
    if claim is None:
        return None
    rows = [r for r in claim.rows if not is_lm_row(r)]
    if not rows and claim.rows:
        return None
    return replace(claim, rows=rows) if is_dataclass(claim) else SimpleNamespace(**{**vars(claim), "rows": rows})


def tested(rows: Rows) -> list[Mapping[str, Any]]:
    """Rows with a verdict read on a metric (not "no information", not "budget too small")."""
    return [r for r in rows if r.get("verdict") not in (None, TOO_SMALL, NO_INFO) and r.get("metric")]


def family_rows(claim: Any, name: str) -> list[Mapping[str, Any]]:
    return [r for r in (claim.rows if claim is not None else []) if r.get("family") == name]


def pair(r: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """A comparison's runs, whichever arm is A: the same pair of arms read in either direction."""
    return frozenset(r.get("a_runs", [])), frozenset(r.get("b_runs", []))


def flipped(r: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    a, b = pair(r)
    return b, a


def overview_rows(claims: Sequence[Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(claim id, group name, row) for every add-against-concat comparison, each pair of arms once (the first
    family that compares it: C6 before C2's repeat of it)."""
    by_id = {c.id: c for c in claims}
    seen: set[tuple[frozenset[str], frozenset[str]]] = set()
    out = []
    for cid, name, group in OVERVIEW:
        for r in family_rows(by_id.get(cid), name):
            if is_lm_row(r):  # drawn in the answer's own picture, against width (``pelab.report.answer``)
                continue
            if pair(r) in seen or flipped(r) in seen:
                continue
            seen.add(pair(r))
            out.append((cid, group, r))
    return out


def at_most(rows: Rows) -> str:
    """ "3.1 pp accuracy": the widest resolution over rows that have one (per metric, joined by "or"), or ""."""
    widest: dict[str, tuple[float, Mapping[str, Any]]] = {}
    for r in rows:
        res = r.get("resolution")
        if res and r.get("metric") and res["within"] > widest.get(r["metric"], (-1.0, r))[0]:
            widest[r["metric"]] = (res["within"], r)
    return " or ".join(size_text(r, w) for w, r in widest.values())


def by_scheme(rows: Rows) -> str:
    """``at_most`` of the rows, per position scheme where they have several ("2.1 pp accuracy with learned positions
    and 24.4 pp accuracy with sinusoidal ones"): one scheme's wide interval should not speak for the other's. Where
    some rows read accuracy, those give the bound and the others are counted ("4 of them read on held-out loss or
    learning speed"): a relative loss bound near the loss floor (two arms at 0.01 and 0.03 nats, "200%") says little
    beside an accuracy bound, and a sentence that strings every metric together says less."""
    on_acc = [r for r in rows if r.get("metric") == "acc" and r.get("resolution")]
    others = [r for r in rows if r.get("metric") != "acc" and r.get("resolution")]
    if on_acc and others:
        more = f" ({len(others)} of them read on held-out loss or learning speed, accuracy being at its ceiling)"
        return _by_scheme(on_acc) + more
    return _by_scheme(rows)


def _by_scheme(rows: Rows) -> str:
    schemes: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        schemes.setdefault(str(r.get("where", {}).get("model.position.scheme", "")), []).append(r)
    parts = [(name, at_most(rs)) for name, rs in schemes.items()]
    parts = [(name, bound) for name, bound in parts if bound]
    if len(parts) < 2 or not all(name for name, _ in parts):
        return at_most(rows)
    said = [f"{bound} with {name} positions" if i == 0 else f"{bound} with {name} ones" for i, (name, bound) in
            enumerate(sorted(parts, key=lambda p: len(schemes[p[0]]), reverse=True))]  # fmt: skip
    return ", ".join(said[:-1]) + f" and {said[-1]}"


def _undecided(rows: Rows, floor: float | None = None, margin: float = 0.01) -> list[str]:
    """The details of the rows no verdict decided: "Undecided: they differ by at most 3.1 pp accuracy", and, with
    the study's ``floor``, the arms among them that failed on some of their seeds (``failing_seeds``); [] when none
    has a resolution."""
    bound = by_scheme(rows)
    if not bound:
        return []
    who = "it differs" if len(rows) == 1 else "both differ" if len(rows) == 2 else "they differ"
    out = [f"Undecided: {who} by at most {bound}"]
    failed = failing_seeds(rows, floor, margin)
    if failed:  # a bimodal arm widens a paired interval more than any difference between the arms
        out.append("Failed seeds among the undecided: " + failed.removeprefix(", where "))
    return out


def failing_seeds(rows: Rows, floor: float | None, margin: float = 0.01) -> str:
    """ ", where add with sinusoidal positions failed on 1 of 8 seeds in reverse (61%) and 1 of 8 in offset (52%)":
    an arm whose mean learned but some of whose seeds ended below the floor by more than the ``margin`` (a seed at
    79.6% against a floor of 80% is at the floor, not a failure), in the rows given. A bimodal arm widens the paired
    interval more than any difference between the arms, and the bound alone would hide why; said once per arm and
    task, never for an arm that failed on every seed (the floor keeps those rows out: ``_out``)."""
    if floor is None:
        return ""
    seen: dict[str, dict[str, tuple[int, int, list[float]]]] = {}
    for r in rows:
        where = r.get("where", {})
        task, scheme = str(where.get("task.name", "")), str(where.get("model.position.scheme", "") or "")
        for side in ("a", "b"):
            accs = [float(v) for _, v in r.get(f"{side}_seed_acc") or []]
            low = sorted(v for v in accs if v < floor - margin)
            if low and sum(v >= floor for v in accs) * 2 >= len(accs):  # most seeds learned, some failed
                arm = str(r[side])
                arm += f" with {scheme} positions" if scheme and scheme not in arm else ""
                seen.setdefault(arm, {})[task] = (len(low), len(accs), low)
    if not seen:
        return ""
    said = []
    below = f" ended more than {100 * margin:g} pp under the {100 * floor:g}% floor"
    for arm, tasks in seen.items():
        accs = {task: ", ".join(f"{100 * v:.1f}%" for v in low) for task, (_, _, low) in tasks.items()}
        counts = {(k, n) for k, n, _ in tasks.values()}
        if len(counts) == 1 and len(tasks) > 1:  # "2 of 10 seeds in each of rotate (…), reverse (…) and lookup (…)"
            ((k, n),) = counts
            each = join_and([f"{t} ({a})" for t, a in accs.items()])
            said.append(f"{arm}{below} on {k} of {n} seeds in each of {each}")
        else:
            said.append(f"{arm}{below} on " + join_and([f"{k} of {n} seeds in {t} ({accs[t]})" for t, (k, n, _) in
                                                   tasks.items()]))  # fmt: skip
        below = ""  # said once: the arms after the first read "; concat_split on 2 of 8 seeds in …"
    return ", where " + "; ".join(said)


def _no_verdict(claim: Any, what: str, rows: Rows | None = None) -> str:
    """ "<what>: <the claim's verdict in words> (N comparisons)", N the rows of the family the sentence reads."""
    verdict = claim.verdict
    if rows is not None:  # the family's own standing: none of its rows was read on a metric
        seen = {r.get("verdict") for r in rows}
        verdict = NOT_RUN if not rows else TOO_SMALL if seen == {TOO_SMALL} else NO_INFO
    rows = claim.rows if rows is None else rows
    counted = f" ({len(rows)} comparison{'s' * (len(rows) != 1)})" if rows else ""
    return f"{what}: {PHRASE.get(verdict, verdict)}{counted}"


def _out(rows: Rows) -> tuple[int, list[str]]:
    """How many comparisons the floor policy kept out, and the detail that names the arms that kept them out
    ("No verdict on 1 more: an arm below the floor (add + 160 at 79.8%; budget too small)"), so the count read is
    not taken for all there were, and a verdict that turns on an arm a hair under the floor says so."""
    out = [r for r in rows if r.get("verdict") == TOO_SMALL]
    if not out:
        return 0, []
    arms = []
    for r in out:
        for side in ("a", "b"):
            acc = r.get(f"{side}_acc")
            if any(str(s).startswith(f"{r.get(side)} below the floor") for s in r.get("skipped", [])) and acc:
                arms.append(f"{r[side]} at {100 * float(acc):.1f}%")
    which = f"{'; '.join(dict.fromkeys(arms))}; " if arms and len(arms) <= 3 else ""
    return len(out), [f"No verdict on {len(out)} more: an arm below the floor ({which}budget too small)"]


def _counts(lead: str, counts: Sequence[tuple[int, str]]) -> str:
    """ "<lead>; 2 equal within the margin, 3 undecided": the lead and the non-zero counts after it."""
    said = [f"{n} {what}" for n, what in counts if n]
    return lead + ("; " + ", ".join(said) if said else "")


Answer = tuple[str, list[str], str]  # (sentence, details under it, the claim's verdict)


def directional(
    claim: Any,
    forward: str,
    backward: str | None,
    what: str,
    a_won: str,
    b_won: str,
    floor: float | None = None,
    margin: float = 0.01,
) -> Answer | None:
    """The answer of a family read both ways (A beats B; B beats A), or None when the claim is absent."""
    if claim is None:
        return None
    rows = tested(family_rows(claim, forward))
    back = tested(family_rows(claim, backward)) if backward else []
    if not rows:
        return _no_verdict(claim, what, family_rows(claim, forward)), [], claim.verdict
    won = [r for r in rows if r["verdict"] == SUPPORTED]
    back_won = [r for r in back if r["verdict"] == SUPPORTED]
    lost_pairs = {pair(r) for r in back_won}
    # one-way families: B ahead beyond the interval is what the resolution's oriented interval says
    behind = [r for r in rows if not backward and r.get("resolution") and r["resolution"]["hi"] < 0]
    lost = [r for r in rows if flipped(r) in lost_pairs or r in behind]
    # refuted without B winning: the interval lies inside the margin, so the arms are equal at this resolution; a row
    # refuted because B was ahead at 95% but not after Holm is no tie (and no win for B): it stays with the rest
    tied = [r for r in rows if r["verdict"] == NOT_SUPPORTED and r not in lost
            and not (r.get("resolution") and r["resolution"]["hi"] < 0)]  # fmt: skip
    early = [r for r in rows if r["verdict"] == UNCONFIRMED]  # no win, counted apart (``rules.decide``)
    rest = [r for r in rows if r not in won and r not in lost and r not in tied and r not in early]
    n_out, out = _out(family_rows(claim, forward))
    if not won and not lost and not back_won:
        lead = f"{what}, neither side won beyond its interval on any of {len(rows)} comparisons"
    else:
        lead = f"{what}, {a_won} on {len(won)} of {len(rows)} comparisons"
        if backward:
            lead += f" and {b_won} on {len(back_won) or 'none'}"
        elif lost:
            lead += f" and {b_won} on {len(lost)}"
    sentence = _counts(lead, [(len(tied), "equal within the margin"), (len(rest), "undecided"),
                              (n_out, "more with an arm below the floor")]) + _early(early)  # fmt: skip
    details = []
    for who, facts in ((a_won, win_facts(rows, floor)), (b_won, win_facts(back, floor) if backward else [])):
        if facts:
            details.append(f"Where {who}: " + "; ".join(facts))
    return sentence, details + _undecided(rest, floor, margin) + _unconfirmed(early) + out, claim.verdict


def _early(rows: Rows) -> str:
    """ "; decided early, not confirmed: 2": counted apart from wins and undecided rows (``rules.UNCONFIRMED``)."""
    return f"; {UNCONFIRMED}: {len(rows)}" if rows else ""


def _unconfirmed(rows: Rows) -> list[str]:
    """ "Decided early, not confirmed: 1 (decided at the look at 5 seeds, not borne out by the 8 its arms got later)":
    comparisons the sequential design stopped that the seeds their arms got later do not bear out; never a win."""
    if not rows:
        return []
    looks = [r.get("looks") or {} for r in rows]
    stops = sorted({int(lk["counts"][-1]) for lk in looks if lk.get("counts")})
    alls = sorted({int(lk["overrun"]) for lk in looks if lk.get("overrun")})
    how = (f" (decided at the look at {' or '.join(map(str, stops))} seeds, not borne out by all "
           f"{' or '.join(map(str, alls))} its arms got later)" if stops and alls else "")  # fmt: skip
    return [f"{UNCONFIRMED[:1].upper()}{UNCONFIRMED[1:]}: {len(rows)}{how}"]


def equivalence(claim: Any, name: str, what: str, floor: float | None = None, margin: float = 0.01) -> Answer | None:
    """The answer of an equivalence family: within the margin on k, apart on m, and the rest's resolution."""
    if claim is None:
        return None
    rows = tested(family_rows(claim, name))
    if not rows:
        return _no_verdict(claim, what, family_rows(claim, name)), [], claim.verdict
    same = sum(r["verdict"] == SUPPORTED for r in rows)
    apart = [r for r in rows if r["verdict"] == NOT_SUPPORTED]
    early = [r for r in rows if r["verdict"] == UNCONFIRMED]
    rest = [r for r in rows if r["verdict"] not in (SUPPORTED, NOT_SUPPORTED, UNCONFIRMED)]
    n_out, out = _out(family_rows(claim, name))
    if same or apart:
        lead = f"{what} were within the margin on {same} of {len(rows)} comparisons and apart beyond it on {len(apart)}"
        counts = [(len(rest), "undecided"), (n_out, "more with an arm below the floor")]
        sentence = _counts(lead, counts) + _early(early)
    else:
        lead = f"{what} were neither shown within the margin nor apart beyond it on any of {len(rows)} comparisons"
        sentence = _counts(lead, [(n_out, "more with an arm below the floor")]) + _early(early)
    details = [f"Apart: {_ahead(apart)}"] if apart else []
    return sentence, details + _undecided(rest, floor, margin) + _unconfirmed(early) + out, claim.verdict


def _ahead(apart: Rows) -> str:
    """ "learned ahead on 1, sinusoidal on 1": which arm led where an equivalence failed; two failures the
    opposite ways are no ranking of the kinds. Where some were read on held-out loss or learning speed (accuracy
    at its ceiling), it says how many: "apart" then means one arm was surer or faster, not more often right."""
    a = sum(r.get("resolution", {}).get("lo", 0) > 0 for r in apart)
    b = sum(r.get("resolution", {}).get("hi", 0) < 0 for r in apart)
    name_a, name_b = apart[0]["a"].split(" + ")[0], apart[0]["b"].split(" + ")[0]
    if a and b:
        who = f"{name_a} ahead on {a}, {name_b} on {b}"
    else:
        leader = name_a if a else name_b
        who = f"{leader} ahead on each" if len(apart) > 1 else f"{leader} ahead"
    return who + _read_on(apart)


def _read_on(rows: Rows) -> str:
    """ "; 2 of them read on held-out loss, accuracy being at its ceiling", or "" where every row read accuracy (or a
    language model's own metric)."""
    fallback = {"loss": "held-out loss", "auc": "learning speed"}
    counts = [(name, sum(r.get("metric") == m for r in rows)) for m, name in fallback.items()]
    counts = [(name, n) for name, n in counts if n]
    if not counts:
        return ""
    if len(rows) == 1:
        return f"; read on {counts[0][0]}, accuracy being at its ceiling"
    said = " and ".join(f"{n} {'of them read ' if i == 0 else ''}on {name}" for i, (name, n) in enumerate(counts))
    return f"; {said}, accuracy being at its ceiling"


def arm_name(label: str) -> str:
    """An arm's label without an input combiner of "none" ("rotary + none" reads "rotary")."""
    return label.removesuffix(" + none")


def oriented(r: Mapping[str, Any]) -> tuple[str, float, float]:
    """The arm set against the one without positions, and the row's interval from the latter's side (positive: it is
    ahead); read from B's side where B is that arm (a log-ratio turns round exactly)."""
    lo, hi = r["resolution"]["lo"], r["resolution"]["hi"]
    if arm_name(r["b"]).startswith("none") and not arm_name(r["a"]).startswith("none"):
        return arm_name(r["a"]), -hi, -lo
    return arm_name(r["b"]), lo, hi


def versus(r: Mapping[str, Any], b: str | None = None) -> str:
    """ "behind rotary by 6.5% to 10.2% in bits per byte", "ahead of learned by …", "within ±0.9% … of sinusoidal":
    where the arm without positions stands against the other by the row's interval (oriented: positive, A better;
    read from B's side where B is that arm, as in C18's masked half)."""
    other, lo, hi = oriented(r)
    b = b or other.split(" + ")[0]  # the scheme: "sinusoidal + add" reads "sinusoidal"
    if metric(r["metric"]).relative and max(abs(lo), abs(hi)) <= LOG_MARGIN:  # a gap inside the margin
        how = "ahead by" if lo > 0 else "behind by" if hi < 0 else "within"
        near, far = (100 * math.expm1(x) for x in (min(abs(lo), abs(hi)), max(abs(lo), abs(hi))))
        span = f"{how} {near:.1f}% to {far:.1f}%" if how != "within" else f"within ±{far:.1f}%"
        return f"within the ±{RELATIVE_MARGIN:.0%} margin of {b} ({span})"
    if lo > 0:
        return f"ahead of {b} by {span_text(r, lo, hi)}"
    if hi < 0:
        return f"behind {b} by {span_text(r, -hi, -lo)}"
    return f"within ±{size_text(r, r['resolution']['within'])} of {b}"


def by_width(rows: Rows, b: str | None = None) -> str:
    """``versus`` of each row; rows at several widths on one side of the same arm, beyond the margin, said once with
    each width ("behind rotary by 24.6% to 27.5% at d=32 and 21.2% to 24.2% at d=64 in bits per byte"): quoting the
    first width alone passed one model size's gap off as the half's (full's C18, 2026-11-29)."""
    return (len(rows) > 1 and _merged(rows, b)) or join_and([versus(r, b) for r in rows])


def _merged(rows: Rows, b: str | None) -> str | None:
    """The rows' gaps in one phrase, as ``versus`` words each, where every row is a relative metric's, at its own
    width, past zero and the margin on the same side of the same arm; else None."""
    heads, labels, spans = set(), set(), []
    for r in rows:
        m, d = metric(r["metric"]), r.get("where", {}).get("model.d")
        other, lo, hi = oriented(r)
        if not m.relative or d is None or lo <= 0 <= hi or max(abs(lo), abs(hi)) <= LOG_MARGIN:
            return None
        near, far = (lo, hi) if lo > 0 else (-hi, -lo)
        heads.add(f"{'ahead of' if lo > 0 else 'behind'} {b or other.split(' + ')[0]}")
        labels.add(m.label)
        spans.append((d, span_text(r, near, far).removesuffix(f" in {m.label}")))  # ``size_text``'s relative form
    if len(heads) != 1 or len(labels) != 1 or len({d for d, _ in spans}) != len(spans):
        return None
    return f"{heads.pop()} by {join_and([f'{sp} at d={d}' for d, sp in sorted(spans)])} in {labels.pop()}"


def failed(r: Mapping[str, Any], side: str) -> bool:
    """A language-model arm of a claims.json row (``tables.row_records``) that did not learn: held-out loss above
    LM_LEARNED_SHARE of its context-free baseline's. False where the row does not say (not a language model)."""
    share = r.get(f"{side}_baseline_share")
    return share is not None and share > LM_LEARNED_SHARE


def half_text(half: str, claim: Any, beside: Rows = ()) -> tuple[str, list[str]] | None:
    """ "causal ones were behind rotary, the best here, by 6.5% to 10.2% in bits per byte" from the half's first
    row with an interval, and where ``beside`` holds rows of the same NoPE arm against other schemes (C7's "none vs
    sinusoidal"), a detail on where it stands against those ("Causal ones were also behind sinusoidal by …");
    "masked ones: not run in this study" from its verdict (``ClaimResult.halves``) where it has none."""
    rows = [r for r in tested(family_rows(claim, half)) if r.get("resolution")]
    if rows:
        r = rows[0]
        nope_side = "b" if arm_name(r["b"]).startswith("none") else "a"
        best = arm_name(r["a" if nope_side == "b" else "b"])
        if failed(r, nope_side):  # its failure is the claim's evidence, but the summary never quotes its numbers
            read = [r]
            text = (f"{half} ones did not learn (held-out loss above {LM_LEARNED_SHARE:.0%} of the context-free "
                    f"model's) where {best}, the best here, did")  # fmt: skip
        else:  # every width whose NoPE arm learned against the same best scheme, not the first width alone
            read = [o for o in rows if oriented(o)[0] == best and not failed(o, nope_side)]
            text = f"{half} ones were {by_width(read, f'{best}, the best here,')}"
        nopes = {pair(o)[0] for o in read}
        said = {pair(o) for o in read}
        others = [o for o in tested(beside) if o.get("resolution") and pair(o)[0] in nopes and pair(o) not in said]
        also = [f"{half.capitalize()} ones were also " + by_width(others)] if others else []
        return text, also
    verdict = next((v for name, v in (claim.halves or {}).items() if name.startswith(half)), None)
    return (f"{half} ones: {PHRASE.get(verdict, verdict)}", []) if verdict else None


def halves_sentence(claim: Any, what: str, beside: Rows = ()) -> Answer | None:
    """C18: each half (causal, masked) in a clause (``half_text``), the causal one beside ``beside``'s rows."""
    if claim is None:
        return None
    parts = [t for half in ("causal", "masked") if (t := half_text(half, claim, beside if half == "causal" else ()))]
    if not parts:
        return _no_verdict(claim, what), [], claim.verdict
    return f"{what}: {'; '.join(t for t, _ in parts)}", [d for _, ds in parts for d in ds], claim.verdict


def answer_sentences(claims: Sequence[Any], floor: float | None = None, margin: float = 0.01) -> list[dict[str, Any]]:
    """At most five answers to the question, each {"id", "verdict", "text", "details"}: the text is one sentence
    that ends before the link, which the template adds ("(C6)"); the details are its numbers, shown under it. With
    the study's ``floor`` (and accuracy ``margin``), a win over an arm that had not learned says so, and so does an
    undecided comparison whose arm failed on some seeds."""
    by_id = {c.id: c for c in claims}
    c6 = without_lm(by_id.get("C6"))  # its language-model rows open the first screen (``pelab.report.answer``)
    made = [
        directional(c6, "concat_split vs add", "add vs concat_split", "At the same width",
                    "concatenating beat adding", "adding beat concatenating", floor, margin),
        directional(c6, "concat_wide vs add at its width", "add at its width vs concat_wide",
                    "Widened to concatenate (concat_wide) against add at that same total width",
                    "concatenating won", "adding won", floor, margin),
        directional(by_id.get("C9"), "concat beats add", None, "On frozen pretrained word vectors (MiniLM)",
                    "adding trailed concatenating", "led it", floor, margin),
        equivalence(by_id.get("C7"), "learned vs sinusoidal", "Learned and sinusoidal positions", floor, margin),
        halves_sentence(by_id.get("C18"), "Language models without positions",
                        family_rows(by_id.get("C7"), "none vs sinusoidal")),
    ]  # fmt: skip
    out = []
    absent = []
    for cid, made_ in zip(("C6", "C6", "C9", "C7", "C18"), made, strict=True):
        if made_ is not None:
            text, details, verdict = made_
            if verdict == NOT_RUN and not details and by_id.get(cid) is not None and not by_id[cid].rows:
                absent.append((cid, text.split(":")[0]))  # said once, together, below
                continue
            out.append({"id": cid, "verdict": verdict, "text": text, "details": details})
    if absent:  # a study that runs none of a claim's comparisons says so in one sentence, not one per claim
        names = ", ".join(f"{what[0].lower() + what[1:]} ({cid})" for cid, what in absent)
        out.append({"id": "", "verdict": NOT_RUN, "text": f"Not run in this study (the full preset runs them): {names}",
                    "details": []})  # fmt: skip
    return out[:5]


__all__ = ["OVERVIEW", "answer_sentences", "failing_seeds", "overview_rows"]
