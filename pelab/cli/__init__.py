"""The `pelab` command, one module per command: encodings.py (list, show, params, claims), run.py, study.py,
report.py (report, results), analyze.py, pretrained.py, check.py, verify.py; app.py holds what they share and
entry.py the entry point (one-line errors, exit codes). Every user mistake ends as one line on stderr and exit
code 2."""

import sys

from pelab import INTERRUPTED

try:  # Ctrl-C while the command's libraries load (its first half second): the same one line, no traceback
    from pelab.cli import encodings, run, study, report, analyze, pretrained, check, verify  # noqa: F401, I001  (each registers its commands, in this order)
    from pelab.cli.app import app, console, preset_path
    from pelab.cli.entry import environment_message, main
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    sys.exit(130)

__all__ = ["app", "console", "environment_message", "main", "preset_path"]
