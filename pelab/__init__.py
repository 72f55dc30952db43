"""pelab: a laboratory for positional encodings in Transformers."""

__version__ = "0.1.0"
