"""Tasks where order matters: one interface (``Task``), one registry."""

from __future__ import annotations

import importlib

from pelab.tasks.base import TASKS, Batch, Task, TaskConfig, register, task_class


def make_task(cfg: TaskConfig) -> Task:
    return task_class(cfg.name)(cfg)


for _module in ("synthetic", "algorithmic", "text", "segments", "digits", "grid2d", "wordorder", "wordlm"):
    importlib.import_module(f"pelab.tasks.{_module}")

__all__ = ["TASKS", "Batch", "Task", "TaskConfig", "make_task", "register", "task_class"]
