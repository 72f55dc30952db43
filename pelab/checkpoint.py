"""Weights in safetensors with the model's config in the header: never pickle."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from pelab.config import ModelConfig
from pelab.errors import PelabError
from pelab.model import Transformer
from pelab.weights.safe import header


def save(model: Transformer, path: str | Path) -> None:
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(path), metadata={"pelab_model_config": model.cfg.canonical_json()})


def load(path: str | Path, device: str = "cpu") -> Transformer:
    """The model saved at ``path``; a link, a file that is not safetensors, or weights that do not fit the
    config in its header end as one PelabError naming the file."""
    if Path(path).is_symlink():
        raise PelabError(f"checkpoint: {path} is a symbolic link; pelab reads only the files it wrote")
    header(path, what="checkpoint", follow=False)  # truncated, garbage, a FIFO: one line, nothing allocated
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except SafetensorError as e:
        raise PelabError(f"checkpoint: {path} is not a safetensors file ({e}); rerun its study to remake it") from None
    if "pelab_model_config" not in meta:
        raise PelabError(f"checkpoint: {path} has no pelab model config in its header")
    try:
        model = Transformer(ModelConfig(**json.loads(meta["pelab_model_config"])))
        model.load_state_dict(load_file(str(path), device=device))
    except (ValueError, TypeError, RuntimeError, SafetensorError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PelabError(f"checkpoint: {path} does not hold a pelab model ({first})") from None
    return model.to(device)
