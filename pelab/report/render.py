"""Rendering the report's templates: the filters they use, and figures embedded in the HTML as data URIs.

Moved out of ``build`` (which assembles the data) so that each stays readable: here is everything that turns
assembled data into text, and nothing that reads the study.
"""

from __future__ import annotations

import base64
import html
import os
import re
from pathlib import Path

import jinja2
import markupsafe

from pelab.errors import visible
from pelab.files import read_regular
from pelab.report.compact import compact
from pelab.report.looks import VERDICT_CLASS, VERDICT_GLYPH
from pelab.rules import VERDICTS


def verdict_split(text: str) -> tuple[str | None, str]:
    """A table cell as (the verdict word it starts with, the rest), or (None, text).

    "supported (2 of 3 tasks)" gives ("supported", " (2 of 3 tasks)"); "exactly" gives no verdict."""
    text = str(text)
    for v in sorted(VERDICTS, key=len, reverse=True):
        if text.startswith(v) and (len(text) == len(v) or not text[len(v)].isalnum()):
            return v, text[len(v) :]
    return None, text


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _embed(path: Path) -> str:
    """A figure as a data URI; only a regular PNG file, never a link (a planted link must not smuggle another
    file's contents into the report) nor anything else. What is refused shows as a missing image."""
    try:
        data = read_regular(path)  # never through a link, never blocking on a FIFO
    except (OSError, ValueError):
        return ""
    if not data.startswith(PNG_MAGIC):
        return ""
    return "data:image/png;base64," + base64.b64encode(data).decode()


def _md_escape(text: str) -> str:
    """User text as inert Markdown: no HTML, no table breaks, and no line break that could end a heading or a
    table row and start a block of its own."""
    flat = visible(" ".join(str(text).splitlines()))  # and no escape code for a terminal that shows report.md
    return html.escape(flat, quote=False).replace("|", "\\|")


def inline_code(text: str) -> markupsafe.Markup:
    """Text with `commands` in backticks (``summary.FULL_COMMAND`` in a sentence) as escaped HTML with <code>: the
    markdown report shows them as code, and the HTML one showed the backticks."""
    parts = re.split(r"`([^`]+)`", str(text))
    return markupsafe.Markup("").join(
        markupsafe.Markup("<code>{}</code>").format(p) if i % 2 else markupsafe.escape(p) for i, p in enumerate(parts)
    )


def fence(text: str) -> str:
    """A code fence longer than any run of backticks inside ``text``, so the text cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", str(text))), default=0)
    return "`" * max(3, longest + 1)


def template_env(folder: Path) -> jinja2.Environment:
    """The report's templates and their filters; figures' paths are made relative to ``folder``."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pelab.report", "templates"),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = _md_escape
    env.filters["fence"] = fence
    env.filters["code"] = inline_code
    env.filters["embed"] = _embed
    env.filters["rel"] = lambda p: os.path.relpath(p, folder)
    env.filters["vclass"] = lambda v: VERDICT_CLASS.get(v, "v-other")
    env.filters["vglyph"] = lambda v: VERDICT_GLYPH.get(v, "·")
    env.filters["vsplit"] = verdict_split
    env.filters["compact"] = lambda t: compact(t.title, t.columns, t.rows)
    return env


__all__ = ["PNG_MAGIC", "fence", "inline_code", "template_env", "verdict_split"]
