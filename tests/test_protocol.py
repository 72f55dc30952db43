"""Frozen protocols and confirmatory grids (SCIENCE.md, "Frozen protocols, fresh seeds"): ``pelab.study.protocol``
writes a study folder's protocol once, keeps its history, and says in the report's line when the rules or the study
file changed since; a ``confirmatory = true`` grid lists fresh seeds of its own, and only its runs, trained after the
protocol declared them and read by its rules, make a comparison confirmatory. No training: hand-made studies, copies
of the rule files in a temporary folder, and fixed dates.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pelab.errors import PelabError
from pelab.rules import Comparison, Side
from pelab.study import protocol as pr
from pelab.study.grid import MIN_CONFIRMATORY_SEEDS, confirmatory_clashes, parse_study, seeds_used

STUDY = """
name = "frozen"
seeds = [0, 1, 2, 3, 4]
[task]
name = "reverse"
length = 5
vocab = 8
[model]
d = 16
n_heads = 2
[train]
steps = 20
[axes]
"model.combine" = ["add", "concat_split"]
[[grid]]
name = "fresh"
seeds = [200, 201, 202, 203, 204]
confirmatory = true
set = { "model.d" = 12 }
axes = { "model.combine" = ["add", "concat_split"] }
"""


def rules_copy(tmp: Path) -> Path:
    """The rule files of the package, copied to a folder of their own (``protocol.RULE_FILES``)."""
    root = tmp / "pkg"
    for f in pr.rule_files():
        target = root / f.relative_to(pr.package_root())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, target)
    return root


# --- the file ----------------------------------------------------------------------------
def test_the_protocol_is_written_once_and_keeps_its_history(tmp_path: Path) -> None:
    study, root = parse_study(STUDY), rules_copy(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    first = pr.record_protocol(folder, study, root, when="2026-11-27T10:00:00+00:00")
    saved = json.loads((folder / pr.RECORD).read_text())
    assert saved == first and saved["format"] == pr.FORMAT and saved["fixed"] == "2026-11-27T10:00:00+00:00"
    assert saved["rules"] == {"sha256": pr.rules_sha256(root), "files": len(pr.rule_files(root))}
    assert saved["study"] == {"sha256": pr.text_sha256(study.source), "name": "frozen"}
    assert saved["commit"] == pr.NOT_GIT and saved["rules_match_commit"] is None  # a folder that is no checkout
    assert saved["confirmatory"] == [{"grid": "fresh", "seeds": [200, 201, 202, 203, 204],
                                      "arms": sorted({r.arm_id for r in study.runs if r.seed == 200})}]  # fmt: skip
    assert saved["later"] == []
    # trained again, nothing changed: kept as it is
    stamp = (folder / pr.RECORD).stat().st_mtime_ns
    assert pr.record_protocol(folder, study, root, when="2026-11-28T10:00:00+00:00") == first
    assert (folder / pr.RECORD).stat().st_mtime_ns == stamp
    # trained again under a changed study file: the first entry stays, the change is appended with its date
    changed = parse_study(STUDY.replace("steps = 20", "steps = 30"))
    again = pr.record_protocol(folder, changed, root, when="2026-11-29T10:00:00+00:00")
    assert again["fixed"] == first["fixed"] and again["study"] == first["study"]
    assert [e["study"]["sha256"] for e in again["later"]] == [pr.text_sha256(changed.source)]
    assert again["later"][0]["date"] == "2026-11-29T10:00:00+00:00"
    assert pr.read_protocol(folder) == again
    # a received folder's later entry whose commit is not text: one line, not a crash in the report's protocol line
    bad = {**again, "later": [{**again["later"][0], "commit": 12345}]}
    (folder / pr.RECORD).write_text(json.dumps(bad))
    with pytest.raises(PelabError, match="is not a protocol pelab wrote .TypeError: an entry's date, commit"):
        pr.read_protocol(folder)
    (folder / pr.RECORD).write_text("{not json")
    with pytest.raises(PelabError, match="is not a protocol pelab wrote"):
        pr.read_protocol(folder)
    assert pr.read_protocol(tmp_path / "nowhere") is None


def test_a_received_protocol_is_read_as_untrusted_input(tmp_path: Path) -> None:
    """protocol.json was read with is_file/read_text: a link out of the folder was followed, a FIFO or a folder there
    was "no protocol", a 3 GB file was read whole and deep nesting was a RecursionError traceback."""
    import os

    from pelab.study.folder import StudyFolder

    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / pr.RECORD
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"format": pr.FORMAT}))
    path.symlink_to(outside)
    with pytest.raises(PelabError, match="protocol.json: is a symbolic link, not a protocol record"):
        pr.read_protocol(folder)
    with pytest.raises(PelabError, match="protocol.json: is a symbolic link"):
        StudyFolder(folder).check()
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(PelabError, match=r"protocol.json: is a FIFO \(named pipe\), not a protocol record"):
        pr.read_protocol(folder)
    with pytest.raises(PelabError, match="protocol.json: is a FIFO"):
        StudyFolder(folder).check()
    path.unlink()
    path.mkdir()
    with pytest.raises(PelabError, match="protocol.json: is a folder, not a protocol record"):
        pr.read_protocol(folder)
    path.rmdir()
    path.write_bytes(b"")
    os.truncate(path, 3 * 2**30)  # sparse: 3 GB on paper
    with pytest.raises(PelabError, match="protocol.json: holds 3,221,225,472 bytes, more than a protocol record"):
        pr.read_protocol(folder)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PelabError, match="is not a protocol pelab wrote .*nested too deep"):
        pr.read_protocol(folder)
    path.unlink()
    assert pr.read_protocol(folder) is None


def test_the_rules_hash_covers_every_file_that_decides_a_verdict(tmp_path: Path) -> None:
    root = rules_copy(tmp_path)
    names = {f.relative_to(root).as_posix() for f in pr.rule_files(root)}
    assert {"rules/families.py", "rules/metrics.py", "study/sequential.py", "study/design.py"} <= names
    assert "report/claims/c06_concat_beats_add.py" in names and "report/build.py" not in names
    assert pr.rules_sha256(root) == pr.rules_sha256()  # the copy hashes as the package does
    before = pr.rules_sha256(root)
    (root / "report" / "claims" / "c99_new.py").write_text("x = 1\n")  # a file added counts
    assert pr.rules_sha256(root) != before


def test_the_package_checkout_gives_its_commit() -> None:
    head = subprocess.run(["git", "-C", str(pr.package_root()), "rev-parse", "HEAD"], capture_output=True, text=True)
    commit, clean = pr.git_commit()
    if head.returncode == 0:
        assert commit == head.stdout.strip() and clean in (True, False)
    else:
        assert (commit, clean) == (pr.NOT_GIT, None)


# --- the report's line -------------------------------------------------------------------
def test_the_protocol_line_and_a_changed_rule_file_after_the_runs(tmp_path: Path) -> None:
    """The report prints the protocol in one line; a rule file edited after the runs were trained trips "the rules
    changed since", and an edited study file "the study file changed since"."""
    study, root = parse_study(STUDY), rules_copy(tmp_path)
    record = pr.record_protocol(tmp_path, study, root, when="2026-11-27T10:00:00+00:00")
    line = pr.protocol_line(record, study, root)
    sha, preset = record["rules"]["sha256"], record["study"]["sha256"]
    assert line.startswith(f"protocol: rules sha256 {sha[:12]}… (not a git checkout), study file sha256 "
                           f"{preset[:12]}…, pelab ")  # fmt: skip
    assert "fixed on 2026-11-27; 1 confirmatory grid(s) declared" in line and "changed since" not in line
    families = root / "rules" / "families.py"
    families.write_text(families.read_text().replace("MIN_EQUIVALENCE_SEEDS", "MIN_EQUIVALENCE_SEEDS ", 1))
    line = pr.protocol_line(record, study, root)
    assert "the rules changed since these runs were trained" in line
    assert "the verdicts below are read by newer rules" in line and "study file changed" not in line
    edited = parse_study(STUDY.replace("steps = 20", "steps = 25"))
    both = pr.protocol_line(record, edited, root)
    assert "the rules changed since" in both and "the study file changed since these runs were trained" in both
    assert pr.protocol_line(None, study).startswith("protocol: none recorded") and "exploratory" in pr.protocol_line(
        None, study
    )


def test_the_line_names_a_commit_and_uncommitted_edits() -> None:
    study = parse_study(STUDY)
    record = {"format": 1, "fixed": "2026-11-27T10:00:00+00:00", "rules": {"sha256": "ab" * 32, "files": 40},
              "commit": "1a2b3c4d5e" + "0" * 30, "rules_match_commit": False, "pelab": "0.1.0",
              "study": {"sha256": "cd" * 32, "name": "frozen"}, "confirmatory": [], "later": []}  # fmt: skip
    line = pr.protocol_line(record, study)
    assert line.startswith("protocol: rules sha256 abababababab… (commit 1a2b3c4, with uncommitted edits to the "
                           "rules), study file sha256 cdcdcdcdcdcd…, pelab 0.1.0, fixed on 2026-11-27")  # fmt: skip
    assert "no confirmatory grid" in line and "the rules changed since" in line  # ab… is not today's hash


def test_later_trainings_say_whether_the_rules_or_the_study_file_moved() -> None:
    """A resume on a later commit is recorded under ``later`` with the same rules and study file: the line says so,
    never "changed rules" (full's report said "4 later training(s) under changed rules or study file" with every
    sha256 the same); a later entry with other rules names the rules."""
    study = parse_study(STUDY)
    first = {"rules": {"sha256": "ab" * 32, "files": 40}, "commit": "1" * 40, "rules_match_commit": True,
             "pelab": "0.1.0", "study": {"sha256": "cd" * 32, "name": "frozen"}, "confirmatory": []}  # fmt: skip
    resumed = [{**first, "commit": c * 40, "date": f"2026-11-2{i}T10:00:00+00:00"} for i, c in enumerate("23", 8)]
    record = {"format": 1, "fixed": "2026-11-27T10:00:00+00:00", **first, "later": resumed}
    line = pr.protocol_line(record, study)
    assert "2 later training(s), the last on 2026-11-29, under the same rules and study file" in line
    assert "changed rules" not in line and "changed study" not in line
    record["later"] = [*resumed, {**resumed[-1], "rules": {"sha256": "ef" * 32, "files": 41}}]
    line = pr.protocol_line(record, study)
    assert "3 later training(s), the last on 2026-11-29, under changed rules (rules sha256 efefefefefef…" in line
    assert "recorded since 2026-11-29 10:00 UTC, commit 3333333)" in line  # where the rules read now were recorded


def test_a_redesign_names_where_the_study_file_read_now_was_recorded() -> None:
    """full's report (2026-11-29) named the first design's commit (3d7e375) and "changed study file", but not where
    the design its language-model verdicts read was fixed (13:09, 6857f79, after a 12:45 redesign and resumes): the
    line names the first entry of the last stretch under today's files, not a resume after it nor an older one."""
    study = parse_study(STUDY)
    first = {"rules": {"sha256": "ab" * 32, "files": 40}, "commit": "1" * 40, "rules_match_commit": True,
             "pelab": "0.1.0", "study": {"sha256": "cd" * 32, "name": "frozen"}, "confirmatory": []}  # fmt: skip

    def entry(commit: str, hour: int, study_sha: str) -> dict:
        return {**first, "commit": commit * 40, "date": f"2026-11-29T{hour:02d}:09:25+00:00",
                "study": {"sha256": study_sha * 32, "name": "frozen"}}  # fmt: skip

    later = [
        entry("2", 8, "cd"),
        entry("3", 12, "88"),
        entry("4", 13, "56"),
        entry("5", 14, "56"),
        entry("6", 21, "56"),
    ]
    record = {"format": 1, "fixed": "2026-11-29T05:52:00+00:00", **first, "later": later}
    line = pr.protocol_line(record, study)
    assert "under changed study file (rules sha256 abababababab…, study file sha256 565656565656…, recorded since " \
           "2026-11-29 13:09 UTC, commit 4444444)" in line  # fmt: skip


# --- which comparisons are confirmatory ---------------------------------------------------
def test_a_comparison_is_confirmatory_only_on_fresh_declared_runs_read_by_its_rules(tmp_path: Path) -> None:
    study, root = parse_study(STUDY), rules_copy(tmp_path)
    record = pr.record_protocol(tmp_path, study, root, when="2026-11-27T10:00:00+00:00")
    fresh = [r for r in study.runs if r.seed >= 200]
    old = [r for r in study.runs if r.seed < 200]
    after = {r.run_id: "2026-11-27T11:00:00+00:00" for r in study.runs}
    runs = pr.confirmatory_runs(record, study, after, root)
    assert runs == {r.run_id for r in fresh}  # the exploratory grid's runs never are
    early = {**after, fresh[0].run_id: "2026-11-26T09:00:00+00:00"}  # one run finished before the protocol
    assert fresh[0].run_id not in pr.confirmatory_runs(record, study, early, root)
    assert pr.confirmatory_runs(None, study, after, root) == frozenset()
    # the rules read now are not those the protocol fixed: exploratory (not read by that protocol alone)
    (root / "rules" / "verdicts.py").write_text((root / "rules" / "verdicts.py").read_text() + "\n")
    assert pr.confirmatory_runs(record, study, after, root) == frozenset()

    def side(cfgs: list, combine: str) -> Side:
        picked = [r for r in cfgs if r.model.combine == combine]
        return Side(combine, {"acc": {r.seed: 0.9 for r in picked}}, run_ids=tuple(r.run_id for r in picked))

    conf = Comparison({"task.name": "reverse"}, side(fresh, "concat_split"), side(fresh, "add"))
    expl = Comparison({"task.name": "reverse"}, side(old, "concat_split"), side(old, "add"))
    with pr.reading_protocol(runs):
        assert pr.is_confirmatory(conf) and pr.reading(conf) == "confirmatory"
        assert not pr.is_confirmatory(expl) and pr.reading(expl) == "exploratory"
        assert pr.is_confirmatory([r.run_id for r in fresh]) and not pr.is_confirmatory([])
    assert not pr.is_confirmatory(conf)  # outside a report: nothing is


def test_claims_json_rows_and_claims_say_confirmatory_or_exploratory(tmp_path: Path) -> None:
    from pelab.report.registry import claim_reading
    from pelab.report.tables import row_records
    from pelab.rules import family

    study = parse_study(STUDY)
    fresh = [r for r in study.runs if r.seed >= 200]

    def side(combine: str, acc: list[float]) -> Side:
        picked = [r for r in fresh if r.model.combine == combine]
        return Side(combine, {"acc": {r.seed: a for r, a in zip(picked, acc, strict=True)}},
                    run_ids=tuple(r.run_id for r in picked))  # fmt: skip

    c = Comparison({"task.name": "reverse"}, side("concat_split", [0.9, 0.92, 0.91, 0.95, 0.9]),
                   side("add", [0.85, 0.86, 0.88, 0.87, 0.85]))  # fmt: skip
    with pr.reading_protocol(r.run_id for r in fresh):
        rows = row_records(family([c], ["acc"], 0.8, 0.01), "x")
    plain = row_records(family([c], ["acc"], 0.8, 0.01), "x")
    assert rows[0]["reading"] == "confirmatory" and plain[0]["reading"] == "exploratory"
    assert claim_reading(rows) == "confirmatory" and claim_reading(plain) == "exploratory"
    assert claim_reading(rows + plain) == "mixed: 1 of 2 comparisons confirmatory, the rest exploratory"
    assert claim_reading([]) == ""


# --- confirmatory grids -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("grid", "needle"),
    [
        ("confirmatory = true", "a confirmatory grid lists its own seeds"),
        ("seeds = [200, 201, 202]\nconfirmatory = true", f"needs at least {MIN_CONFIRMATORY_SEEDS} seeds"),
        ("seeds = [4, 200, 201, 202, 203]\nconfirmatory = true", "[4] are also trained by the study's seeds"),
        ("seeds = [7, 200, 201, 202, 203]\nconfirmatory = true", "[7] are also trained by the study's seeds or the "
         "seeds its rounds may add"),
        ("seeds = [300, 301, 302, 303, 304]\nconfirmatory = true", "are also trained by grid 'other'"),
        ("seeds = [200, 201, 202, 203, 204]\nconfirmatory = 1", "confirmatory: must be true or false"),
    ],
)  # fmt: skip
def test_a_confirmatory_grid_must_train_fresh_seeds_of_its_own(grid: str, needle: str) -> None:
    base = STUDY.split("[[grid]]")[0] + "[sequential]\nmax_seeds = 8\n"
    other = '[[grid]]\nname = "other"\nseeds = [300, 301]\nset = { "model.d" = 20 }\n'
    text = base + other + f'[[grid]]\nname = "c"\nset = {{ "model.d" = 12 }}\n{grid}\n'
    with pytest.raises(PelabError) as e:
        parse_study(text)
    assert needle in str(e.value) and str(e.value).startswith("grid 'c' confirmatory")
    fresh = '[[grid]]\nname = "c"\nseeds = [200, 201, 202, 203, 204]\nconfirmatory = true\nset = { "model.d" = 12 }\n'
    ok = parse_study(base + other + fresh)
    assert [g.confirmatory for g in ok.grids] == [False, False, True]


def test_confirmatory_grids_on_the_same_seeds_are_one_test() -> None:
    """add at concat_wide's width is a grid of its own, and its seeds must pair with concat_wide's: confirmatory grids
    on exactly the same seeds parse; one on an overlapping but different list clashes."""
    base = STUDY.split("[[grid]]")[0]
    grid = '[[grid]]\nname = "{}"\nseeds = {}\nconfirmatory = true\nset = {{ "model.d" = {} }}\n'
    seeds = [500, 501, 502, 503, 504]
    ok = parse_study(base + grid.format("wide", seeds, 12) + grid.format("add at its width", seeds, 24))
    assert [g.confirmatory for g in ok.grids] == [False, True, True]  # the study's own axes, then the two
    with pytest.raises(PelabError, match="are also trained by grid 'other'"):
        parse_study(base + grid.format("wide", seeds, 12) + grid.format("other", [*seeds[:4], 505], 24))


def test_seeds_used_and_a_planted_clash_with_a_pilot() -> None:
    study = parse_study(STUDY)
    assert seeds_used(study) == {0, 1, 2, 3, 4, 200, 201, 202, 203, 204}
    pilot = parse_study(STUDY.split("[[grid]]")[0].replace("seeds = [0, 1, 2, 3, 4]", "seeds = [100, 201]"))
    assert confirmatory_clashes(study, {"pilot p": pilot}) == ["frozen: grid 'fresh' shares seeds [201] with pilot p"]
    clean = parse_study(STUDY.split("[[grid]]")[0].replace("seeds = [0, 1, 2, 3, 4]", "seeds = [100, 101]"))
    assert confirmatory_clashes(study, {"pilot p": clean}) == []


def test_no_confirmatory_grid_of_a_preset_shares_a_seed_with_a_pilot_or_another_preset() -> None:
    """Walks every preset (pelab/presets/*.toml) and every recorded pilot (bench/pilots/*.toml): each confirmatory
    grid's seeds are trained by no pilot and by no grid of another preset (within its own preset the study file's
    validation keeps them apart)."""
    from pelab.study.grid import load_study

    here = Path(__file__).resolve().parents[1]
    presets = {f"preset {p.stem}": load_study(p) for p in sorted((here / "pelab" / "presets").glob("*.toml"))}
    pilots = {f"pilot {p.stem}": load_study(p) for p in sorted((here / "bench" / "pilots").glob("*.toml"))}
    assert presets and pilots
    clashes = []
    for name, study in presets.items():
        others = {**pilots, **{n: s for n, s in presets.items() if n != name}}
        clashes += confirmatory_clashes(study, others)
    assert clashes == []
    declared = [g.name for s in presets.values() for g in s.grids if g.confirmatory]
    print(f"confirmatory grids in the presets: {declared or 'none yet'}")
    assert all(re.fullmatch(r"preset \w+", n) for n in presets)
