"""Word order in real text, seen through MiniLM's frozen word vectors (claim C9).

wordorder   the first n MiniLM word pieces of a paragraph of real English, forwards
            or (with probability 1/2) reversed: which? Reversal keeps the multiset
            of pieces, so without positions the task is impossible (an encoder with
            no position signal is permutation-equivariant, so its pooled output is
            the same both ways: 50%). With positions it needs word identity at a
            position (paragraphs open with "return", "this", "if"; a reversed window
            opens mid-sentence or with "."), and word pairs in order ("of the", not
            "the of"): exactly what adding positions to frozen word vectors may blur.

The text is the prose of the corpus: comment and docstring lines of the default
corpus (Python's standard library, the same files and train/validation/test split as
``charlm``), or any text file or folder named by ``task.corpus`` (text that reads
as Python source is likewise cut down to its comments and docstrings). A line is
prose when it reads as words (letters, spaces, light punctuation, no code);
consecutive prose lines form a paragraph, paragraphs are tokenised with MiniLM's
WordPiece tokenizer and joined by [SEP] into one stream per split. A window starts
at a paragraph start and runs on across [SEP] when the paragraph is shorter than n.
Training draws paragraphs at random; evaluation reads every held-out paragraph
once forwards and once reversed, so it is the same, balanced set for every run.

Tokenising the default corpus takes seconds, and every run of a study is a fresh
process that checks its data (``check_data``, which reads the streams) before it trains, so
the streams are also kept on disk (``cache_dir``), keyed by the corpus (for the default
one: the interpreter's standard library and version; for a named one: its files'
sizes and times), the tokenizer file and this module's and ``text``'s source: any
change to what makes the streams makes new ones.

The model side is decided here: MiniLM's 30522-word vocabulary with its frozen word
vectors (``token_table="minilm"``), two classes, pooled.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from pelab.errors import PelabError
from pelab.tasks import register
from pelab.tasks import text as text_task
from pelab.tasks.base import Batch, Task
from pelab.tasks.text import default_corpus, load_corpus

#: A prose line: only word characters, spaces and light punctuation, at least MIN_WORDS words.
PROSE = re.compile(r"^[A-Za-z0-9 ,.;:'\"()!?\-]+$")
MIN_WORDS = 4
#: Leading markers stripped before a line is judged: comment hashes, docstring quotes.
MARKERS = re.compile(r"^(#+|\"\"\"|''')\s*")
#: Python source is read for its comments and docstrings only; text with this share of
#: lines opening a definition or an import counts as Python.
CODE = re.compile(r"^\s*(def|class|import|from \S+ import)\b")
CODE_SHARE = 0.01
#: Fewest paragraphs each split must hold (evaluation reads every validation paragraph both ways).
MIN_PARAGRAPHS = 20
#: Code that slips through (a docstring's code example, a string that fooled the quote count).
CALL = re.compile(r"\w\(")
BLOCK = re.compile(r"^(if|elif|else|for|while|with|try|except|finally|def|class|return|raise|assert)\b.*:$")
NOT_LETTER = re.compile(r"[^A-Za-z]")


def is_python(lines: list[str]) -> bool:
    return sum(bool(CODE.match(line)) for line in lines) >= CODE_SHARE * max(len(lines), 1)


def text_lines(lines: list[str]) -> list[str]:
    """Python source: its comment and docstring lines, every other line blanked (it ends a paragraph)."""
    out, in_doc = [], False
    for raw in lines:
        s = raw.strip()
        out.append(s if in_doc or s.startswith(("#", '"""', "'''")) else "")
        if (s.count('"""') + s.count("'''")) % 2:
            in_doc = not in_doc
    return out


def is_prose(line: str) -> bool:
    return (
        bool(PROSE.match(line))  # first: it turns most lines away, and what it passes is ASCII
        and len(line.split()) >= MIN_WORDS
        and len(NOT_LETTER.sub("", line)) >= 0.7 * len(line)
        and not CALL.search(line)
        and not BLOCK.match(line)
    )


def prose_paragraphs(text: str) -> list[str]:
    """Runs of consecutive prose lines (of comments and docstrings, for Python), each joined into one paragraph."""
    lines = text.splitlines()
    if is_python(lines):
        lines = text_lines(lines)
    paragraphs: list[str] = []
    current: list[str] = []
    for raw in lines:
        line = MARKERS.sub("", raw.strip()).rstrip("\"'# ").strip()
        if is_prose(line):
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


#: The streams a corpus gives, in ``word_pieces``'s order.
STREAMS = ("train", "val", "test")


def tokenize(corpus: str | None) -> tuple[torch.Tensor, ...]:
    """(train, validation, test) streams of MiniLM word-piece ids, paragraphs separated by [SEP]."""
    from pelab.weights import tokenizer

    tok = tokenizer()
    streams = []
    for data in load_corpus(corpus):
        paragraphs = prose_paragraphs(bytes(data.numpy()).decode("utf-8", errors="replace"))
        ids: list[int] = []
        for piece in tok.encode_batch(paragraphs):
            ids.extend(piece)
            ids.append(tok.sep_id)
        streams.append(torch.tensor(ids, dtype=torch.long))
    return tuple(streams)


def cache_dir() -> Path:
    """$PELAB_CACHE, else $XDG_CACHE_HOME/pelab, else ~/.cache/pelab (``pelab.files.cache_dir``)."""
    from pelab.files import cache_dir as shared

    return shared()


def cache_key(corpus: str | None) -> str | None:
    """What the streams depend on, hashed; None for a corpus that does not exist (load_corpus says why)."""
    from pelab.weights import model_dir

    if corpus is None:  # the stdlib read is fixed by the interpreter
        files: object = ["stdlib", str(default_corpus()), sys.version]
    else:
        root = Path(corpus)
        if not root.exists():
            return None
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        files = [[str(p.resolve()), st.st_size, st.st_mtime_ns] for p in paths for st in [p.stat()]]
    tok = model_dir() / "tokenizer.json"
    code = [hashlib.sha1(Path(f).read_bytes()).hexdigest() for f in (__file__, text_task.__file__)]
    parts = [files, str(tok), tok.stat().st_size, tok.stat().st_mtime_ns, code, text_task.MAX_BYTES]
    return hashlib.sha1(json.dumps(parts).encode()).hexdigest()[:16]


def read_streams(path: Path) -> tuple[torch.Tensor, ...] | None:
    """The cached streams at ``path``; None when absent, or damaged (``weights.safe.read_id_cache``: one line
    says so, and they are made again): other tensors than STREAMS, or not 1-D int64 MiniLM word-piece ids."""
    from pelab.weights.safe import read_id_cache

    cached = read_id_cache(path, {k: ("I64", None) for k in STREAMS}, STREAMS)
    return None if cached is None else tuple(cached[k] for k in STREAMS)


@functools.lru_cache(maxsize=4)
def word_pieces(corpus: str | None) -> tuple[torch.Tensor, ...]:
    """``tokenize(corpus)``, read from the disk cache when it holds it, else made and stored there."""
    from pelab.weights.safe import write_cache

    key = cache_key(corpus)
    if key is None:
        return tokenize(corpus)
    path = cache_dir() / f"wordorder-{key}.safetensors"
    cached = read_streams(path)
    if cached is not None:
        return cached
    streams = tokenize(corpus)
    write_cache(path, dict(zip(STREAMS, streams, strict=True)))
    return streams


@functools.lru_cache(maxsize=32)
def starts_of(corpus: str | None, split: str, n: int) -> torch.Tensor:
    """``paragraph_starts`` of a split's stream, once per (corpus, split, n) per process."""
    from pelab.weights import tokenizer

    return paragraph_starts(word_pieces(corpus)[STREAMS.index(split)], n, tokenizer().sep_id)


def paragraph_starts(stream: torch.Tensor, n: int, sep_id: int) -> torch.Tensor:
    """Offsets in ``stream`` where a paragraph starts and n pieces follow."""
    starts = torch.cat([torch.zeros(1, dtype=torch.long), torch.nonzero(stream == sep_id).squeeze(1) + 1])
    return starts[starts + n <= len(stream)]


@register
class WordOrder(Task):
    name = "wordorder"
    order = "whether the word pieces read forwards or reversed"
    # C9's evidence was this task's until its arms all sat near the 80% floor; C9 now reads ``wordlm``. This task
    # stays, by name, for study files and folders that train it, and serves no claim of a preset.
    claims = ()
    description = "classify: a real paragraph's first n word pieces, forwards or reversed? (MiniLM's frozen vectors)"
    kind = "classify"

    def validate(self) -> None:
        if self.cfg.length < 2:
            raise PelabError(f"task.length: wordorder needs at least 2 word pieces to reverse (got {self.cfg.length})")

    def check_data(self) -> None:
        for split in STREAMS:
            found = len(self.starts(split, self.max_n))
            if found < MIN_PARAGRAPHS:
                raise PelabError(
                    f"task.corpus: the {split} split holds {found} "
                    f"paragraphs of prose with {self.max_n} word pieces after their start; wordorder needs "
                    f"{MIN_PARAGRAPHS}"
                )

    def model_fields(self) -> dict[str, object]:
        from pelab.weights import VOCAB_SIZE

        return dict(kind="encoder", vocab_size=VOCAB_SIZE, n_outputs=2, head="pool", token_table="minilm")

    def stream(self, split: str) -> torch.Tensor:
        return word_pieces(self.cfg.corpus)[STREAMS.index(split)]

    def starts(self, split: str, n: int) -> torch.Tensor:
        return starts_of(self.cfg.corpus, split, n)

    def windows(self, split: str, starts: torch.Tensor, reverse: torch.Tensor, n: int) -> Batch:
        """The n pieces from each start, reversed where ``reverse``; label 1 = reversed (and changed)."""
        text = self.stream(split)[starts[:, None] + torch.arange(n)]  # (B, n)
        x = torch.where(reverse[:, None], text.flip(1), text)
        label = (x != text).any(dim=1).long()  # a palindrome reversed is no change
        return Batch(x, label, torch.ones(len(x), dtype=torch.bool))

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        n = n or self.n
        starts = self.starts(split, n)
        pick = starts[torch.randint(0, len(starts), (size,), generator=generator)]
        reverse = torch.rand(size, generator=generator) < 0.5
        return self.windows(split, pick, reverse, n)

    def eval_batches(
        self, n: int, batch_size: int, count: int, generator: torch.Generator, split: str = "test"
    ) -> Iterator[Batch]:
        """Every held-out paragraph, forwards then reversed (``count`` and ``generator`` are not needed)."""
        starts = self.starts(split, n)
        for reverse in (False, True):
            for i in range(0, len(starts), batch_size):
                chunk = starts[i : i + batch_size]
                yield self.windows(split, chunk, torch.full((len(chunk),), reverse), n)
