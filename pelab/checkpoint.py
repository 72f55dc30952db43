"""Weights in safetensors with the model's config in the header: never pickle."""

from __future__ import annotations

import json
import os
from pathlib import Path

import safetensors.torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from pelab.config import ModelConfig
from pelab.errors import PelabError
from pelab.files import read_file
from pelab.model import Transformer
from pelab.weights.safe import header, tensors


def save(model: Transformer, path: str | Path) -> None:
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(path), metadata={"pelab_model_config": model.cfg.canonical_json()})


#: Largest checkpoint read back (bytes): pelab's presets save a few MB; a file past this is damaged or planted.
MAX_CHECKPOINT_BYTES = 1 << 32


def load(path: str | Path, device: str = "cpu") -> Transformer:
    """The model saved at ``path``; a link, a file that is not safetensors, or weights that do not fit the
    config in its header end as one PelabError naming the file. The file is read through one descriptor
    (``files.open_regular``: never a link, never a FIFO), its header checked against its length and its tensors
    against the model its config builds before a byte of weights is read; a file too large for memory says so."""
    if Path(path).is_symlink():
        raise PelabError(f"checkpoint: {path} is a symbolic link; pelab reads only the files it wrote")
    head = header(path, what="checkpoint", follow=False, exact=True)  # cut short, garbage, a FIFO: nothing allocated
    meta = head.get("__metadata__") or {}
    if "pelab_model_config" not in meta:
        raise PelabError(f"checkpoint: {path} has no pelab model config in its header")
    try:
        model = Transformer(ModelConfig(**json.loads(meta["pelab_model_config"])))
        expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        if tensors(head) != expected:
            wrong = sorted(set(tensors(head).items()) ^ set(expected.items()))[0][0]
            raise ValueError(f"its tensor {wrong[:80]!r} is not the model's")
        data = read_file(path, "a checkpoint", MAX_CHECKPOINT_BYTES)
        model.load_state_dict(safetensors.torch.load(data))
    except MemoryError:
        size = os.lstat(path).st_size
        raise PelabError(
            f"checkpoint: {path} ({size:,} bytes) does not fit in memory: it is damaged, or too large for this "
            "machine; rerun its study to remake it"
        ) from None
    except (ValueError, TypeError, RuntimeError, SafetensorError) as e:
        if isinstance(e, PelabError) and str(e).startswith("checkpoint:"):
            raise
        if isinstance(e, PelabError):  # a config or weights pelab cannot build (rows no table holds): the file's fault
            raise PelabError(f"checkpoint: {path} holds a model pelab cannot build ({e})") from None
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PelabError(f"checkpoint: {path} does not hold a pelab model ({first})") from None
    return model.to(device)
