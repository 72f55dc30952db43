"""Claims that need a real pretrained model (MiniLM): C9 and C16."""

from __future__ import annotations

CLAIMS: list = []
