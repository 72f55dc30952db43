"""Tasks where order matters: one interface (``Task``), one registry."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pelab.errors import unknown
from pelab.tasks.base import Batch, Task

if TYPE_CHECKING:
    from pelab.config import TaskConfig

TASKS: dict[str, type[Task]] = {}


def register(cls: type[Task]) -> type[Task]:
    if not cls.name or cls.name in TASKS:
        raise RuntimeError(f"task name {cls.name!r} is empty or taken")
    TASKS[cls.name] = cls
    return cls


def task_class(name: str) -> type[Task]:
    try:
        return TASKS[name]
    except KeyError:
        raise unknown("task", name, TASKS) from None


def make_task(cfg: TaskConfig) -> Task:
    return task_class(cfg.name)(cfg)


for _module in ("synthetic", "algorithmic", "text", "segments", "digits", "grid2d", "wordorder"):
    importlib.import_module(f"pelab.tasks.{_module}")

__all__ = ["TASKS", "Batch", "Task", "make_task", "register", "task_class"]
