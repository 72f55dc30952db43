import sys

from pelab import INTERRUPTED

try:  # Ctrl-C while Python compiles or loads the command (before its own handlers): one line, no traceback
    from pelab.cli import main
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    sys.exit(130)

main()
