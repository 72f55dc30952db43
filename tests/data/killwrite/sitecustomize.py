"""Test-only (tests/test_killwrite.py): every Python process started with this folder on PYTHONPATH imports it,
the study's driver, workers and report pool alike. It wraps ``os.replace``, the last step of every pelab write
(``pelab.files.atomic_path``): each write into ``$PELAB_KILL_DIR`` is logged to ``$PELAB_KILL_LOG``, and the
write numbered ``$PELAB_KILL_AT``, or the first whose path matches ``$PELAB_KILL_MATCH``, SIGKILLs the whole
process group before the file lands, as a kill -9 of the study would at that moment."""

import fcntl
import os
import re
import signal

_real_replace = os.replace


def _replace(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
    root = os.environ.get("PELAB_KILL_DIR")
    target = os.path.abspath(os.fspath(dst))
    if root and target.startswith(root + os.sep):
        name = os.path.relpath(target, root)
        with open(os.environ["PELAB_KILL_LOG"], "a+") as log:
            fcntl.flock(log, fcntl.LOCK_EX)  # driver and workers count one sequence
            log.seek(0)
            n = len(log.readlines()) + 1
            log.write(name + "\n")
            log.flush()
            os.fsync(log.fileno())
            at, match = os.environ.get("PELAB_KILL_AT"), os.environ.get("PELAB_KILL_MATCH")
            if (at and n == int(at)) or (match and re.search(match, name)):
                os.killpg(os.getpgid(0), signal.SIGKILL)
    return _real_replace(src, dst, *args, **kwargs)


os.replace = _replace
