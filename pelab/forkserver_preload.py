"""Imported by the fork server alone (``pelab.forkserver.PRELOAD``), never by other code: it makes the server
ignore SIGINT before the server records the handlers its children restore, so a child forked from it
ignores Ctrl-C until its own code says otherwise (see ``pelab.forkserver``)."""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
