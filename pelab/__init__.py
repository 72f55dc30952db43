"""pelab: a laboratory for positional encodings in Transformers."""

# First, before anything else loads: when this process is the `pelab` command (its console script, or `python -m
# pelab`), a Ctrl-C while the command's modules load ends it with the one line below and exit 130, never a
# traceback from whichever import it landed in. The command installs its own handler once it runs
# (``pelab.interrupts``). ``_signal`` is the C module: ``import signal`` would load ``enum`` first, a window of its
# own. A program that merely imports pelab (a notebook, the tests, a worker) keeps its own Ctrl-C.
import _signal
import sys

__version__ = "0.1.0"

#: The one line an interrupted command ends with (``pelab.cli``, and ``python -m pelab`` while it loads the CLI).
INTERRUPTED = "pelab: interrupted (a study resumes where it stopped: run the same command again)"


def _interrupted_while_loading(signum: int, frame: object) -> None:
    import os

    os.write(2, (INTERRUPTED + "\n").encode())
    os._exit(130)


def _is_the_command() -> bool:
    """Whether this process runs `pelab` itself: its console script (argv[0] ends in /pelab), or ``python -m
    pelab`` (runpy imports this package while argv[0] is still "-m")."""
    first = sys.argv[0] if sys.argv else ""
    return first == "-m" or first.rsplit("/", 1)[-1] == "pelab"


if _is_the_command() and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    try:
        _signal.signal(_signal.SIGINT, _interrupted_while_loading)
    except ValueError:  # not the main thread: nothing to guard
        pass
