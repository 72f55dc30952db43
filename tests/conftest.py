"""Shared test settings.

The models under test are tiny, so intra-op threading only adds overhead (on a
2-core machine it made a forward pass ~100x slower); one thread keeps the whole
suite fast without changing any result.
"""

from __future__ import annotations

import signal

import torch

torch.set_num_threads(1)

# A suite started in the background of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and an ignored
# signal stays ignored in every process it starts: the Ctrl-C tests' studies would never see their SIGINT and run
# to the end. A handler (unlike SIG_IGN) is reset to the default on exec, so the studies get Ctrl-C as a user's.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
