"""Character-level (byte-level) language modelling on real text.

The default corpus is the Python standard library's own source, found from the
running interpreter, so it is present wherever Python is and needs no download.
Files are split into train and validation by a hash of their relative path
(deterministic, and no file is in both). A user can name any text file or folder;
a single file is split by position (the last tenth validates).
"""

from __future__ import annotations

import functools
import hashlib
import sysconfig
from pathlib import Path

import torch

from pelab.errors import PelabError
from pelab.tasks import register
from pelab.tasks.base import Batch, Task

#: Bytes read from a corpus at most (train and validation together): enough for
#: small models, and quick to load in every worker.
MAX_BYTES = 6_000_000
TEXT_SUFFIXES = {".py", ".txt", ".md", ".rst", ".tex", ".html", ".json", ".csv", ".c", ".h", ".js"}


def default_corpus() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _is_validation(rel: str) -> bool:
    return int(hashlib.sha1(rel.encode()).hexdigest(), 16) % 10 == 0


@functools.lru_cache(maxsize=4)
def load_corpus(path: str | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(train bytes, validation bytes) as uint8 tensors."""
    root = Path(path) if path else default_corpus()
    if not root.exists():
        raise PelabError(f"task.corpus: {root} does not exist; give a text file or a folder of text files")
    if root.is_file():
        data = root.read_bytes()[:MAX_BYTES]
        cut = int(len(data) * 0.9)
        train, val = data[:cut], data[cut:]
    else:
        suffixes = {".py"} if path is None else TEXT_SUFFIXES
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in suffixes)
        parts: dict[bool, list[bytes]] = {True: [], False: []}
        total = 0
        for f in files:
            if total >= MAX_BYTES:
                break
            try:
                data = f.read_bytes()
            except OSError:
                continue
            parts[_is_validation(str(f.relative_to(root)))].append(data)
            total += len(data)
        train, val = b"\n".join(parts[False]), b"\n".join(parts[True])
    if len(train) < 1000 or len(val) < 100:
        raise PelabError(f"task.corpus: {root} holds too little text ({len(train)} + {len(val)} bytes)")
    as_tensor = lambda b: torch.frombuffer(bytearray(b), dtype=torch.uint8)  # noqa: E731
    return as_tensor(train), as_tensor(val)


@register
class CharLM(Task):
    name = "charlm"
    description = "decoder: byte-level language modelling on real text (default: Python's standard library)"
    kind = "decoder"
    reports_perplexity = True

    def validate(self) -> None:
        load_corpus(self.cfg.corpus)

    def model_fields(self) -> dict[str, object]:
        return dict(kind="decoder", vocab_size=256, n_outputs=256, head="token")

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        n = n or self.n
        train, val = load_corpus(self.cfg.corpus)
        data = train if split == "train" else val
        if len(data) <= n + 1:
            raise PelabError(f"task.length: {n} is longer than the {split} text ({len(data)} bytes)")
        start = torch.randint(0, len(data) - n - 1, (size,), generator=generator)
        window = data[start[:, None] + torch.arange(n + 1)].long()  # (B, n+1)
        return Batch(window[:, :-1], window[:, 1:], torch.ones(size, n, dtype=torch.bool))
