"""pelab: a laboratory for positional encodings in Transformers."""

__version__ = "0.1.0"

#: The one line an interrupted command ends with (``pelab.cli``, and ``python -m pelab`` while it loads the CLI).
INTERRUPTED = "pelab: interrupted (a study resumes where it stopped: run the same command again)"
