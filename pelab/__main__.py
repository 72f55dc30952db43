import sys

try:  # Ctrl-C while Python compiles or loads the command (before its own handlers): one line, no traceback
    from pelab.cli import main
except KeyboardInterrupt:
    print("pelab: interrupted (a study resumes where it stopped: run the same command again)", file=sys.stderr)
    sys.exit(130)

main()
