"""Rendering the report's templates: the filters they use, and figures embedded in the HTML as data URIs.

Moved out of ``build`` (which assembles the data) so that each stays readable: here is everything that turns
assembled data into text, and nothing that reads the study.
"""

from __future__ import annotations

import base64
import errno
import html
import os
import re
import stat
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

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
#: The most a figure may weigh to be embedded. pelab's own weigh 20-700 kB (the heaviest, MiniLM's dimensions, 0.7 MB);
#: a cache folder's planted 200 MB "PNG" must not become a 280 MB page that takes a browser, or the report, down.
MAX_FIGURE_BYTES = 8 * 2**20
#: The most pixels a figure may hold, and on a side: a browser decodes the whole image (a full study's tallest forest
#: plot is 880 x 4149, 3.7 Mpx), so a few kilobytes of deflate that claim 100,000 x 100,000 are left out too.
MAX_FIGURE_PIXELS = 64 * 10**6
MAX_FIGURE_SIDE = 32_768


class Embedded(NamedTuple):
    """A figure as the HTML report shows it: its data URI, or "" and why it was left out."""

    uri: str
    why: str


def png_problem(data: bytes) -> str:
    """Why ``data`` is not a whole, sane PNG image ("" when it is): the signature, then chunk by chunk (each one's
    length within the file and its CRC) from an IHDR whose size is sane to an IEND that ends the file."""
    if not data.startswith(PNG_MAGIC):
        return "not a PNG image"
    at, first = len(PNG_MAGIC), True
    while at + 12 <= len(data):
        (length,) = struct.unpack_from(">I", data, at)
        kind, body_end = data[at + 4 : at + 8], at + 8 + length
        if body_end + 4 > len(data):
            return "a damaged PNG image (truncated)"
        if zlib.crc32(data[at + 4 : body_end]) != struct.unpack_from(">I", data, body_end)[0]:
            return "a damaged PNG image (a chunk fails its CRC)"
        if first:
            if kind != b"IHDR" or length != 13:
                return "a damaged PNG image (it does not start with its header)"
            width, height = struct.unpack_from(">II", data, at + 8)
            if not (
                0 < width <= MAX_FIGURE_SIDE and 0 < height <= MAX_FIGURE_SIDE and width * height <= MAX_FIGURE_PIXELS
            ):
                return f"a PNG image of {width} x {height} pixels, more than a figure holds"
            first = False
        at = body_end + 4
        if kind == b"IEND":
            return "" if at == len(data) else "a damaged PNG image (data after its end)"
    return "a damaged PNG image (truncated)"


def figure(path: Path) -> Embedded:
    """A figure as a data URI, or why it is left out: only a regular PNG file of at most ``MAX_FIGURE_BYTES`` that
    reads as a whole PNG of sane size, never through a link (a planted link must not smuggle another file's contents
    into the report). Never raises: a figure that cannot be shown is a line in the report, not a failed report."""
    try:
        data = read_regular(path, limit=MAX_FIGURE_BYTES)  # never through a link, never blocking on a FIFO
    except FileNotFoundError:
        return Embedded("", "missing")
    except OSError as e:
        return Embedded("", "a symbolic link" if e.errno == errno.ELOOP else visible(e.strerror or e))
    except ValueError as e:  # a special file ("it is a FIFO (named pipe)"), or a file over the limit
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size > MAX_FIGURE_BYTES:
            mb = st.st_size / 2**20
            return Embedded("", f"{mb:,.0f} MB, more than the {MAX_FIGURE_BYTES // 2**20} MB a figure may weigh")
        return Embedded("", visible(e))
    why = png_problem(data)
    return Embedded("", why) if why else Embedded("data:image/png;base64," + base64.b64encode(data).decode(), "")


#: Markdown that user text (a study's name, a grid's, a failure's reason) could hold, each made inert by a backslash
#: where it would act and nowhere else, so pelab's own text (concat_split, [−1.8%, −0.8%], d=32: add) is written byte
#: for byte as before: a backslash that would escape what follows; a table's `|`; `](`, `][` and `]:`, which make a
#: link, an image or a link's definition of brackets; `*` and `~` (emphasis, strikethrough), and `_` unless between
#: two letters or digits (where it cannot emphasise); a scheme's `://` and `www.`, which GitHub makes links of.
_MD_ACTIVE = [
    (re.compile(r"\\(?=[!-/:-@\[-`{-~])"), r"\\\\"),
    (re.compile(r"\|"), r"\\|"),
    (re.compile(r"\](?=[(\[:])"), r"]\\"),
    (re.compile(r"[*~]"), r"\\\g<0>"),
    (re.compile(r"(?<![^\W_])_|_(?![^\W_])"), r"\\_"),
    (re.compile(r"(?i)\b(https?|ftp)(?=://)"), r"\1\\"),
    (re.compile(r"(?i)\bwww(?=\.)"), r"www\\"),
]
#: A code span as pelab writes one in its own text (`pelab study --preset full`): one backtick each side, as
#: Markdown pairs them, left to right. Nothing in it acts, and a backslash would show, so it is left as it was.
_MD_CODE = re.compile(r"(?<![`\\])(`[^`]+`)(?!`)")
#: Four spaces that would start a paragraph's code block; Markdown drops a paragraph's leading spaces anyway.
_MD_INDENT = re.compile(r"^ {4,}")
#: What starts a block of its own at the start of a paragraph (the description, a note): a heading's `#`, a list's
#: `-`, `+` or `1.`, a code fence's backticks.
_MD_BLOCK_START = re.compile(r"^( {0,3})(#|[-+](?=\s|$|[-+])|\d{1,9}(?=[.)](?:\s|$))|```)")


def _md_inert(text: str) -> str:
    for pattern, escaped in _MD_ACTIVE:
        text = pattern.sub(escaped, text)
    return text


def _block_escaped(m: re.Match[str]) -> str:
    lead, mark = m.group(1), m.group(2)
    return f"{lead}{mark}\\" if mark[0].isdigit() else f"{lead}\\{mark}"


def _md_escape(text: str) -> str:
    """User text as inert Markdown: no HTML, no table breaks, no line break that could end a heading or a table row
    and start a block of its own, and no Markdown that would act (a link, an image, emphasis; ``_MD_ACTIVE``) outside
    a code span: a name reads as typed, and pelab's own text as before."""
    flat = visible(" ".join(str(text).splitlines()))  # and no escape code for a terminal that shows report.md
    parts = _MD_CODE.split(html.escape(flat, quote=False))
    out = "".join(p.replace("|", "\\|") if i % 2 else _md_inert(p) for i, p in enumerate(parts))
    return _MD_BLOCK_START.sub(_block_escaped, _MD_INDENT.sub("", out))


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


def shown(value: object) -> object:
    """Every value a template prints, as ``visible`` shows it (its ``finalize``): a name, a description, a reason
    from the folder can hold an escape code (ESC, BEL) that a terminal showing report.md, or ``cat report.html``,
    would act on; here it becomes text (``\\x1b``) in both reports, wherever the template prints it. Newlines and
    tabs stay (the study file, the caveats' lines). Markup (a macro's or a filter's HTML) stays Markup: what
    ``visible`` writes has no character HTML treats specially."""
    if isinstance(value, jinja2.Undefined):
        return value
    if isinstance(value, markupsafe.Markup):
        return markupsafe.Markup(visible(value, lines=True))
    return visible(value, lines=True)


def template_env(folder: Path) -> jinja2.Environment:
    """The report's templates and their filters; figures' paths are made relative to ``folder``."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pelab.report", "templates"),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=shown,
    )
    env.filters["md"] = _md_escape
    env.filters["fence"] = fence
    env.filters["code"] = inline_code
    env.filters["figure"] = figure
    env.filters["rel"] = lambda p: os.path.relpath(p, folder)
    env.filters["vclass"] = lambda v: VERDICT_CLASS.get(v, "v-other")
    env.filters["vglyph"] = lambda v: VERDICT_GLYPH.get(v, "·")
    env.filters["vsplit"] = verdict_split
    env.filters["compact"] = lambda t: compact(t.title, t.columns, t.rows)
    return env


__all__ = [
    "MAX_FIGURE_BYTES",
    "PNG_MAGIC",
    "Embedded",
    "figure",
    "png_problem",
    "fence",
    "inline_code",
    "template_env",
    "verdict_split",
]
