"""Weights in safetensors with the model's config in the header: never pickle."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file, save_file

from pelab.config import ModelConfig
from pelab.model import Transformer


def save(model: Transformer, path: str | Path) -> None:
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(path), metadata={"pelab_model_config": model.cfg.canonical_json()})


def load(path: str | Path, device: str = "cpu") -> Transformer:
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if "pelab_model_config" not in meta:
        raise ValueError(f"checkpoint: {path} has no pelab model config in its header")
    model = Transformer(ModelConfig(**json.loads(meta["pelab_model_config"])))
    model.load_state_dict(load_file(str(path), device=device))
    return model.to(device)
