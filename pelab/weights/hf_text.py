"""The text files of a model folder (config.json, tokenizer.json, vocab.json, vocab.txt), read as hostile input.

Each is read bounded in size, through links (a hub cache's snapshot links to its blobs) but never blocking on a
FIFO, as UTF-8, and parsed with ``json`` alone; anything else (a loop of links, 100,000-deep JSON, Latin-1, ids
that are not integers, a list where a map belongs) is one PelabError naming the file.
"""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path

import torch
from torch import Tensor

from pelab.errors import PelabError
from pelab.files import read_regular

#: Largest config.json and tokenizer file read (bytes); a real one is a few kB, and a tokenizer tens of MB.
MAX_CONFIG_BYTES, MAX_VOCAB_BYTES = 1 << 20, 1 << 28


def read_text(path: Path, limit: int) -> str:
    """A text file of a model folder (through links, as hub caches use them); a FIFO, a device, a loop of
    links, a file over ``limit`` bytes or one that is not UTF-8: one PelabError naming it."""
    try:
        return read_regular(path, limit, follow=True).decode("utf-8").lstrip("\ufeff")
    except OSError as e:
        why = "a loop of symbolic links" if e.errno == errno.ELOOP else (e.strerror or str(e))
        raise PelabError(f"model: cannot read {path} ({why})") from None
    except UnicodeDecodeError as e:
        raise PelabError(f"model: {path} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except ValueError as e:
        raise PelabError(f"model: cannot read {path} ({e})") from None


def read_json(path: Path, limit: int) -> object:
    try:
        return json.loads(read_text(path, limit))
    except RecursionError:
        raise PelabError(f"model: {path} is not readable JSON (nested too deep)") from None
    except ValueError as e:
        raise PelabError(f"model: {path} is not readable JSON ({e})") from None


SPECIAL = re.compile(r"^(\[.*\]|<.*>)$")  # [PAD], [unused17], <s>, <|endoftext|>, <pad>


def vocabulary(folder: Path) -> dict[int, str] | None:
    """id -> token from tokenizer.json, vocab.json or vocab.txt (json only, no tokenizer library); a file that
    is not what its name says: one PelabError naming it."""
    if (folder / "tokenizer.json").is_file():
        path = folder / "tokenizer.json"
        tok = read_json(path, MAX_VOCAB_BYTES)
        try:
            vocab = (tok.get("model") or {}).get("vocab")  # type: ignore[union-attr]
            out: dict[int, str] = {}
            if isinstance(vocab, dict):
                out = {_id(i): str(t) for t, i in vocab.items()}
            elif isinstance(vocab, list):  # unigram: [[piece, score], ...]
                out = {i: str(v[0]) for i, v in enumerate(vocab)}
            out.update({_id(a["id"]): str(a["content"]) for a in tok.get("added_tokens") or []})  # type: ignore
        except (AttributeError, TypeError, KeyError, IndexError, ValueError):
            raise PelabError(f"model: {path} is not a tokenizer: its model.vocab and added_tokens must map tokens "
                             "to integer ids") from None  # fmt: skip
        return out or None
    if (folder / "vocab.json").is_file():
        path = folder / "vocab.json"
        vocab = read_json(path, MAX_VOCAB_BYTES)
        try:
            return {_id(i): str(t) for t, i in vocab.items()}  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            raise PelabError(f"model: {path} must be a JSON object of token -> integer id") from None
    if (folder / "vocab.txt").is_file():
        return dict(enumerate(read_text(folder / "vocab.txt", MAX_VOCAB_BYTES).splitlines()))
    return None


def _id(value: object) -> int:
    """A token id: a non-negative integer (ValueError otherwise)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(value)
    return value


def trained_word_rows(folder: Path, rows: int) -> Tensor | None:
    """Word rows that are the tokenizer's ordinary tokens (no [PAD], [unused17], <s>, padding rows past
    the vocabulary); None when the folder has no vocabulary: every row is analysed."""
    vocab = vocabulary(folder)
    if vocab is None:
        return None
    keep = [i for i in range(rows) if i in vocab and not SPECIAL.match(vocab[i])]
    return torch.tensor(keep, dtype=torch.long) if keep else None
