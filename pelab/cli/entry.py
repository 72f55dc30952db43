"""The entry point: every user mistake ends as one line on stderr and exit code 2, Ctrl-C and SIGTERM as one
line and exit 130 or 143, never a traceback."""

from __future__ import annotations

import errno
import os
import signal
import sys
from typing import NoReturn

from typer.exceptions import Abort, TyperException

from pelab import INTERRUPTED, interrupts
from pelab.cli.app import app
from pelab.errors import PelabError, visible


def environment_message(e: OSError) -> str:
    """One line for an error of the machine rather than of the input: the path, what is wrong, what to do."""
    path = e.filename if e.filename is not None else "?"
    what = e.strerror or str(e)
    if e.errno == errno.ENOSPC:
        return f"{path}: the disk is full; free some space and run the same command again (a study resumes)"
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{path}: {what}; make it writable or choose another path"
    if e.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        return f"{path}: {what}: a file stands where a folder is needed, or the other way round; choose another path"
    return f"{path}: {what}"


def database_message(e: Exception) -> str:
    """One line for an SQLite error that reached the top: a full disk or a busy database is the machine's state,
    not damage, so only damage is told to move results.sqlite away."""
    text = " ".join(str(e).split())
    if "full" in text:
        return "results database: the disk is full; free some space and run the same command again (a study resumes)"
    if "locked" in text or "busy" in text:
        return f"results database: {text}; another program holds it: wait for it, then run the same command again"
    if "readonly" in text or "unable to open" in text or "I/O" in text:
        return f"results database: {text}; make the study folder writable (or the disk readable) and run it again"
    return f"results database: {text}; move the study folder's results.sqlite away"


def usage_message(e: TyperException) -> str:
    """Click's usage error on one line, led by the option or argument it is about when there is one."""
    msg = " ".join(e.format_message().split())
    param = getattr(e, "param", None)
    name = getattr(e, "option_name", None) or (param.opts[0] if param is not None and param.opts else None)
    return f"{name.lstrip('-')}: {msg}" if name else msg


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's or `timeout`'s stop), raised where Ctrl-C's KeyboardInterrupt would be, so a study
    stops the same way: workers ended, nothing half-done stored, the lock released, resumable."""


def main() -> None:
    """Entry point: one-line errors, exit 2, no traceback; SIGTERM stops as Ctrl-C does (exit 143, not 130)."""
    main_pid, fired = os.getpid(), []

    def terminate(signum: int, frame: object) -> None:
        if os.getpid() != main_pid:  # a process forked from this one: SIGTERM ends it as it would have
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        fired.append(signum)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        with interrupts.remembered():
            rc = _main()
            if rc == 0 and interrupts.pending():  # a Ctrl-C swallowed after the last write: still an interrupt
                rc = 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    if fired and rc in (130, 1):  # typer and click hand Ctrl-C back as 130 (or an Abort); this was SIGTERM
        print(INTERRUPTED.replace("interrupted", "stopped by SIGTERM", 1), file=sys.stderr)
        sys.exit(143)
    if rc == 130:
        print(INTERRUPTED, file=sys.stderr)
    sys.exit(rc)


def fail(message: str) -> NoReturn:
    """The one line every user mistake ends as, exit 2: user text inside it (a name, a path, a stored value) has
    its control characters made visible, so the line can neither rewrite the terminal nor fail to encode."""
    print(f"pelab: error: {visible(message)}", file=sys.stderr)
    sys.exit(2)


def _main() -> int:
    try:  # a Ctrl-C this early (CI caught one inside this import) is still one line, not a traceback
        import sqlite3
    except KeyboardInterrupt:
        return 130
    try:
        rc = app(standalone_mode=False)
    except PelabError as e:
        fail(str(e))
    except TyperException as e:  # click's usage errors: bad option, missing argument
        if type(e).__name__ == "NoArgsIsHelpError":  # `pelab` alone: the help is already printed (cf. typer #1278)
            sys.exit(2)
        fail(usage_message(e))
    except OSError as e:  # the machine's errors: disk full, read-only, a file where a folder goes
        fail(environment_message(e))
    except sqlite3.Error as e:
        fail(database_message(e))
    except MemoryError:
        fail("out of memory; lower the sizes (d, batch, length) or free memory")
    except (Abort, KeyboardInterrupt):
        rc = 130
    except Exception:
        # A Ctrl-C that landed inside a lazy import (numpy's, scipy's) leaves that module half-imported, and the
        # next import of it fails (ImportError, RecursionError) far from the interrupt: after a Ctrl-C, any
        # error is the interrupt's, and ends as one (exit 130, one line).
        if not interrupts.pending():
            raise
        rc = 130
    return rc if isinstance(rc, int) else 0
