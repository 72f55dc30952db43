"""Shared test settings.

The models under test are tiny, so intra-op threading only adds overhead (on a
2-core machine it made a forward pass ~100x slower); one thread keeps the whole
suite fast without changing any result.
"""

from __future__ import annotations

import torch

torch.set_num_threads(1)
