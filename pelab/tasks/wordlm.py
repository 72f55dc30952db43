"""A causal language model over MiniLM's word pieces of real text, on MiniLM's frozen word vectors (claim C9).

wordlm  predict word piece t+1 from pieces 1..t, scored at every position, on windows of n+1 pieces drawn at
        uniform random starts of a split's stream (as ``charlm`` draws bytes). The next piece needs word
        meaning (which pieces follow which) and order (which came last): what adding positions to frozen word
        vectors may blur. Unlike ``wordorder``'s forwards-or-reversed label, a language model's held-out loss
        sits far from both its floor and its ceiling, so two arms' bits per byte can be told apart to a few
        percent over a few seeds.

The text is the corpus of ``charlm`` (``task.corpus``: prose by default, the State of the Union addresses; or
code, or a path), with its split by file into train, validation and test (``pelab.tasks.text``). Each split's
text is tokenised line by line with MiniLM's uncased WordPiece tokenizer (lines meet at whitespace, which
WordPiece drops, so this is the whole text's tokenisation) into one stream of piece ids per split.

The vocabulary is cut to what the training split uses: its VOCAB - 1 most frequent pieces (ties by MiniLM's id;
MiniLM's own [UNK] is not among them), ranked 0..VOCAB-2 most frequent first, then [UNK] (id VOCAB - 1) for
every other piece. ``kept_pieces`` lists their MiniLM ids (the frozen table's rows, MiniLM's [UNK] vector last).
A training split with fewer distinct pieces fills the list with unused pieces, in id order, so the vocabulary
always has VOCAB entries and a config says its size without reading any text.

Why VOCAB = 4096: the output softmax over the cut vocabulary (d_model x VOCAB per piece) is the bulk of a small
model's cost. On the prose corpus the 4095 most frequent pieces cover 93.6% of the training pieces (93.8% of the
test pieces); 2048 cover 86.7% (a seventh of the targets would be [UNK]) and 8192 cover 98.2% at twice the
softmax. 4096 keeps [UNK] to one target in sixteen at half the cost of 8192.

Bits per byte (``bytes_per_target``): a piece stands for about five bytes of text, so the loss in nats per piece
over ln 2 is divided by the split's bytes per piece (its UTF-8 bytes over its pieces), which makes it bits per
byte of that split's text, on the scale of the byte-level models. It is not quite their measure: WordPiece
drops case and spacing, and [UNK] stands for any rare piece without spelling it, so a word-piece model is
charged for less than a byte model must predict; compare wordlm arms with one another.

Tokenising the prose corpus takes about ten seconds, and every run of a study is a fresh process, so the
streams are kept on disk (``pelab.files.cache_dir``), keyed by everything that makes them: the corpus's files
(path, size, time), the byte budget, the tokenizer file and this module's and ``text``'s source. A damaged
cache file gets one line and is made again.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import torch
from torch import Tensor

from pelab.errors import PelabError
from pelab.tasks import register
from pelab.tasks import text as text_task
from pelab.tasks.base import SPLITS, Batch, Task
from pelab.tasks.text import PROSE, corpus_source, load_corpus, text_files, windows

#: The cut vocabulary's size: VOCAB - 1 pieces of the training split, then [UNK] (see the module docstring).
VOCAB = 4096
#: The tensors of a cache file: one stream per split, and each split's bytes of text.
BYTES = "bytes"


def tokenize(corpus: str | None) -> tuple[tuple[Tensor, ...], tuple[int, ...]]:
    """Each split's MiniLM word-piece ids (int32, 1-D) and its bytes of text."""
    from pelab.weights import tokenizer

    tok = tokenizer()
    streams, sizes = [], []
    for data in load_corpus(corpus):
        lines = bytes(data.numpy()).decode("utf-8", errors="replace").splitlines()
        ids = [i for piece in tok.encode_batch(lines) for i in piece]
        streams.append(torch.tensor(ids, dtype=torch.int32))
        sizes.append(len(data))
    return tuple(streams), tuple(sizes)


def cache_key(corpus: str | None) -> str | None:
    """What the streams depend on, hashed; None for a corpus that does not exist (load_corpus says why)."""
    from pelab.weights import model_dir

    source = corpus_source(corpus)
    root = source.root
    if not root.exists():
        return None
    paths = [root] if root.is_file() else [root / rel for rel in text_files(root, set(source.suffixes))]
    files = [[str(p), st.st_size, st.st_mtime_ns] for p in paths for st in [p.stat()]]
    tok = model_dir() / "tokenizer.json"
    code = [hashlib.sha1(Path(f).read_bytes()).hexdigest() for f in (__file__, text_task.__file__)]
    parts = [source.name, str(root.resolve()), files, source.max_bytes, str(tok), tok.stat().st_size,
             tok.stat().st_mtime_ns, code]  # fmt: skip
    return hashlib.sha1(json.dumps(parts).encode()).hexdigest()[:16]


def read_cache(path: Path) -> tuple[tuple[Tensor, ...], tuple[int, ...]] | None:
    """The cached streams and byte counts at ``path``; None when absent, or damaged (``weights.safe.read_id_cache``:
    one line says so, and they are made again): other tensors than the splits and their bytes, streams not 1-D
    int32 MiniLM ids, or a split without text."""
    from pelab.weights.safe import read_id_cache

    def some_text(cached: dict[str, Tensor]) -> None:
        if int(cached[BYTES].min()) <= 0:
            raise ValueError(f"a split of {int(cached[BYTES].min())} bytes")

    spec = {**{k: ("I32", None) for k in SPLITS}, BYTES: ("I64", len(SPLITS))}
    cached = read_id_cache(path, spec, SPLITS, some_text)
    if cached is None:
        return None
    return tuple(cached[k] for k in SPLITS), tuple(int(b) for b in cached[BYTES])


@functools.lru_cache(maxsize=4)
def word_pieces(corpus: str | None) -> tuple[tuple[Tensor, ...], tuple[int, ...]]:
    """``tokenize(corpus)``, read from the disk cache when it holds it, else made and stored there."""
    from pelab.files import cache_dir
    from pelab.weights.safe import write_cache

    key = cache_key(corpus)
    if key is None:
        return tokenize(corpus)
    path = cache_dir() / f"wordlm-{key}.safetensors"
    cached = read_cache(path)
    if cached is not None:
        return cached
    streams, sizes = tokenize(corpus)
    write_cache(path, {**dict(zip(SPLITS, streams, strict=True)), BYTES: torch.tensor(sizes, dtype=torch.int64)})
    return streams, sizes


@functools.lru_cache(maxsize=8)
def kept_pieces(corpus: str | None, size: int = VOCAB) -> tuple[int, ...]:
    """The MiniLM ids of the cut vocabulary, in its order: the training split's ``size - 1`` most frequent pieces
    (ties by id; pieces it never uses fill the list, in id order, where it has fewer), then MiniLM's [UNK]."""
    from pelab.weights import VOCAB_SIZE, tokenizer

    unk = tokenizer().unk_id
    counts = torch.bincount(word_pieces(corpus)[0][0].long(), minlength=VOCAB_SIZE)
    counts[unk] = -1  # never ranked: [UNK] is the last row
    ids = torch.arange(VOCAB_SIZE)
    # most frequent first, ties by id: a stable sort of the ids by descending count
    ranked = ids[torch.sort(-counts, stable=True).indices]
    return (*ranked[: size - 1].tolist(), unk)


@functools.lru_cache(maxsize=8)
def remapped(corpus: str | None, size: int = VOCAB) -> tuple[Tensor, ...]:
    """Each split's stream in the cut vocabulary's ids (0..size-1; size - 1 is [UNK]), int64."""
    from pelab.weights import VOCAB_SIZE

    lookup = torch.full((VOCAB_SIZE,), size - 1, dtype=torch.long)
    lookup[torch.tensor(kept_pieces(corpus, size)[:-1], dtype=torch.long)] = torch.arange(size - 1)
    return tuple(lookup[s.long()] for s in word_pieces(corpus)[0])


@functools.lru_cache(maxsize=8)
def unigram_loss(corpus: str | None, size: int = VOCAB) -> float:
    """The test pieces' cross-entropy (nats per piece) under the training pieces' frequencies, add-one smoothed
    over the cut vocabulary."""
    train, _, test = remapped(corpus, size)
    counts = torch.bincount(train, minlength=size).double() + 1.0
    return float(-torch.log(counts / counts.sum())[test].mean())


def bytes_per_piece(corpus: str | None, split: str) -> float:
    """A split's bytes of text over its word pieces."""
    streams, sizes = word_pieces(corpus)
    i = SPLITS.index(split)
    return sizes[i] / max(1, len(streams[i]))


@register
class WordLM(Task):
    name = "wordlm"
    order = "the next word piece depends on the pieces before it, in order"
    claims = ("C9",)
    description = "decoder: language modelling over MiniLM's word pieces of real text, on MiniLM's frozen vectors"
    kind = "decoder"
    reports_perplexity = True
    default_corpus = PROSE
    # Scored at the training context only, as charlm is: a longer window is only more context.
    extrapolates = False

    def check_data(self) -> None:
        streams = remapped(self.cfg.corpus)
        for split, stream in zip(SPLITS, streams, strict=True):
            if len(stream) < self.n + 1:
                raise PelabError(
                    f"task.length: {self.n} needs {self.n + 1} word pieces, more than the {split} split of the "
                    f"corpus holds ({len(stream)}); give a shorter length or a larger corpus"
                )

    def model_fields(self) -> dict[str, object]:
        return dict(kind="decoder", vocab_size=VOCAB, n_outputs=VOCAB, head="token", token_table="minilm",
                    token_rows=self.cfg.corpus)  # fmt: skip

    def context_free_loss(self) -> float:
        return unigram_loss(self.cfg.corpus)

    def bytes_per_target(self, split: str) -> float:
        return bytes_per_piece(self.cfg.corpus, split)

    def batch(self, split: str, size: int, generator: torch.Generator, n: int | None = None) -> Batch:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        n = n or self.n
        window = windows(remapped(self.cfg.corpus)[SPLITS.index(split)], size, n + 1, generator)  # (B, n+1)
        return Batch(window[:, :-1], window[:, 1:], torch.ones(size, n, dtype=torch.bool))


__all__ = ["VOCAB", "WordLM", "bytes_per_piece", "kept_pieces", "remapped", "unigram_loss", "word_pieces"]
