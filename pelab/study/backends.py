"""Where runs execute. The local backend: one fresh process per group, N at a time.

A group is one arm's seeds, trained as one stacked computation (``pelab.study.groups``). A process per
group (forked from a forkserver that has already imported torch, so starting one is cheap) means the driver
always knows which runs a dead worker was doing: a worker killed by a signal makes exactly its group's runs
``failed`` (none of them was stored yet: a group's runs are stored when it returns), and the study goes on.
Workers ignore SIGINT (the driver decides what Ctrl-C means) and hold a
"lifeline" pipe to the driver: if the driver dies, even by SIGKILL, the pipe reaches EOF and the worker exits
instead of training for nobody.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
import signal
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from pelab import forkserver, interrupts, plugins
from pelab.config import RunConfig
from pelab.records import RunResult
from pelab.study.folder import checkpoint_file

OnResult = Callable[[RunConfig, RunResult], None]


def default_threads(workers: int) -> int:
    """Threads per worker so that workers x threads fits the cores."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def device_slots(device: str, gpus: int, runs_per_gpu: int) -> list[str]:
    """The device of each local worker on CUDA: ``runs_per_gpu`` per GPU, the GPUs in turn (cuda:0, cuda:1, ...,
    cuda:0, ...) so the first runs spread over every GPU; a ``cuda:N`` the user named gets them all."""
    if device.startswith("cuda:"):
        return [device] * runs_per_gpu
    return [f"cuda:{i}" for _ in range(runs_per_gpu) for i in range(gpus)]


def _watch_lifeline(lifeline: Connection) -> None:
    try:
        lifeline.recv()
    except (EOFError, OSError):
        pass
    os._exit(3)  # the driver is gone: nobody will store this run


def _worker(
    cfgs_json: list[str],
    device: str,
    threads: int,
    checkpoints: list[str | None],
    results: Connection,
    lifeline: Connection,
    carried: list[dict] | None = None,
    run_ids: list[str] | None = None,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_lifeline, args=(lifeline,), daemon=True).start()
    from pelab.train import train_group

    try:  # the driver's plugins (pelab.plugins): the same code, hash checked, before any config is read
        plugins.restore(carried)
        cfgs = [RunConfig.model_validate_json(c) for c in cfgs_json]
    except Exception as e:  # noqa: BLE001 - a worker that cannot read its runs fails them, saying why
        why = " ".join(str(e).split()) or type(e).__name__
        out = [RunResult(run_id=r, status="failed", reason=why, host=platform.node()) for r in run_ids or []]
        results.send([r.model_dump_json() for r in out])
        results.close()
        return
    out = train_group(cfgs, device=device, threads=threads, checkpoints=checkpoints)
    for result in out:
        result.host = platform.node()
    results.send([r.model_dump_json() for r in out])
    results.close()


@dataclass
class _Running:
    cfgs: list[RunConfig]
    process: mp.process.BaseProcess
    results: Connection
    lifeline: Connection
    device: str


def run_local(
    groups: Iterable[list[RunConfig]],
    on_result: OnResult,
    workers: int = 1,
    threads: int | None = None,
    device: str = "auto",
    checkpoint_dir: str | Path | None = None,
    devices: list[str] | None = None,
    carried: list[dict] | None = None,
) -> None:
    """Train every group (one arm's seeds, ``pelab.study.groups``), ``workers`` at a time, calling ``on_result``
    in this process for each run as its group ends.

    ``devices``: one device per worker slot (``device_slots``: several runs per GPU); a run takes a free slot's
    device and gives it back when it ends. Without it every run gets ``device``. ``carried``: the driver's
    plugins (``pelab.plugins.carried``), which each worker loads before it reads its runs."""
    ctx = forkserver.context()
    free = list(devices) if devices else [device] * workers
    threads = threads or default_threads(len(free))
    pending = [list(g) for g in groups]
    running: list[_Running] = []
    try:
        while pending or running:
            while pending and free:
                cfgs = pending.pop(0)
                slot = free.pop(0)
                res_r, res_w = ctx.Pipe(duplex=False)
                life_r, life_w = ctx.Pipe(duplex=False)
                ckpts = [str(checkpoint_file(checkpoint_dir, c.run_id)) if checkpoint_dir else None for c in cfgs]
                p = ctx.Process(
                    target=_worker,
                    args=(
                        [c.model_dump_json() for c in cfgs],
                        slot,
                        threads,
                        ckpts,
                        res_w,
                        life_r,
                        carried,
                        [c.run_id for c in cfgs],
                    ),
                    name=f"pelab-run-{cfgs[0].run_id}" + (f"+{len(cfgs) - 1}" if len(cfgs) > 1 else ""),
                    daemon=True,
                )
                with interrupts.deferred():  # a started worker is in `running`, so the finally below ends it
                    p.start()
                    res_w.close()
                    life_r.close()
                    running.append(_Running(cfgs, p, res_r, life_w, slot))
            wait([r.results for r in running] + [r.process.sentinel for r in running], timeout=5.0)
            interrupts.check()  # a Ctrl-C the interpreter swallowed (in a finalizer, an import) stops the study here
            for r in list(running):
                results = _collect(r)
                if results is not None:
                    running.remove(r)
                    free.append(r.device)
                    r.process.join(timeout=5)
                    r.results.close()
                    r.lifeline.close()
                    for cfg, result in zip(r.cfgs, results, strict=True):
                        on_result(cfg, result)
    finally:
        for r in running:  # interrupted: stop the workers, store nothing half-done
            r.lifeline.close()
            if r.process.is_alive():
                r.process.kill()
            r.process.join(timeout=5)


def _collect(r: _Running) -> list[RunResult] | None:
    """The group's results, one per run in order, if it has ended one way or another, else None."""
    if r.results.poll():
        try:
            return [RunResult.model_validate_json(x) for x in r.results.recv()]
        except EOFError:
            pass
    elif r.process.is_alive():
        return None
    r.process.join(timeout=5)
    code = r.process.exitcode
    how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return [
        RunResult(
            run_id=c.run_id,
            status="failed",
            reason=f"worker process died ({how}) before returning",
            host=platform.node(),
        )
        for c in r.cfgs
    ]
