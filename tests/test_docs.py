"""docs/claims.md is written from the claims registry; it must say what the code decides."""

from __future__ import annotations

from pathlib import Path

from pelab.report.catalog import all_claims
from pelab.report.summary import claims_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs" / "claims.md"


def test_docs_match_the_registry() -> None:
    assert DOCS.read_text() == claims_markdown() + "\n", "run: pelab claims --markdown > docs/claims.md"


def test_every_claim_of_science_md_is_declared_once() -> None:
    ids = [c.id for c in all_claims()]
    assert ids == sorted(set(ids), key=lambda i: int(i[1:]))
    assert set(ids) >= {f"C{i}" for i in range(1, 18)}
    for c in all_claims():
        assert c.claim and c.source and c.rule and f'<a id="{c.id.lower()}"></a>' in DOCS.read_text()


def test_claims_command_prints_the_docs() -> None:
    from typer.testing import CliRunner

    from pelab.cli import app

    r = CliRunner().invoke(app, ["claims", "--markdown"])
    assert r.exit_code == 0 and r.output == DOCS.read_text()
    r = CliRunner().invoke(app, ["claims"])
    assert r.exit_code == 0 and "C17" in r.output
