"""Where runs execute, on a Ray cluster: one Ray task per group, the driver still the only writer.

A task is the same pure function as a local worker: it trains one group (one arm's seeds, stacked:
``pelab.study.groups``) and returns each run's result, plus its checkpoint's bytes (a remote node cannot write into
the driver's study folder), and the driver stores both. What Ray adds is
placement across machines and recovery from lost machines:

- a task whose worker process or node dies is retried by Ray, ``retries`` times,
  then stored as ``failed`` (a restart retries it again, as locally);
- a run that fails for its own reasons is a ``failed`` result from ``train_run``,
  which never raises for them, so Ray has nothing to retry;
- the study's state lives in the driver's database, so a driver restarted after
  a crash skips finished runs exactly as the local backend does.

Runs are bit-identical to the local backend's for the same config and thread
count: the worker calls the same ``train_run`` with the same seeds.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import platform
import socket
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pelab.config import RunConfig
from pelab.errors import PelabError
from pelab.files import write_atomic
from pelab.records import RunResult
from pelab.study.backends import OnResult
from pelab.study.folder import checkpoint_file

INSTALL_HINT = "backend: 'ray' needs Ray, which is not installed; install it with: pip install 'pelab[ray]'"
DEFAULT_RETRIES = 3
PROBE_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0


def require_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        raise PelabError(INSTALL_HINT)


@dataclass
class Cluster:
    """What the driver is connected to; printed before the study starts."""

    address: str
    started_here: bool
    nodes: list[str]
    cpus: float
    gpus: float
    largest_node_cpus: float

    def describe(self) -> str:
        where = "a local Ray instance" if self.started_here else f"the Ray cluster at {self.address}"
        gpus = f", {self.gpus:g} GPU(s)" if self.gpus else ""
        return f"{where} ({len(self.nodes)} node(s), {self.cpus:g} CPU(s){gpus})"


def _alive_nodes(ray: Any) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


@contextmanager
def connect(address: str | None) -> Iterator[Cluster]:
    """Start a local Ray instance (no address) or join a running cluster; always let go of it after.

    The caller has already checked that Ray is installed and the address answers (``require_ray``,
    ``check_address``): the driver does it before it touches the study folder.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a study should not phone home
    import ray

    quiet = dict(log_to_driver=False, logging_level=logging.ERROR, namespace="pelab")
    try:
        if address is None:
            info = ray.init(address="local", include_dashboard=False, **quiet)
        else:
            info = ray.init(address=address, **quiet)
    except Exception as e:  # noqa: BLE001 - whatever Ray says (unreachable, auth, version), it is about the address
        where = address or "a new local instance"
        raise PelabError(f"address: cannot join a Ray cluster at {where}: {_first_line(e)}") from None
    try:
        nodes = _alive_nodes(ray)
        total = ray.cluster_resources()
        yield Cluster(
            address=info.address_info.get("gcs_address", address or "local"),
            started_here=address is None,
            nodes=[n["NodeManagerAddress"] for n in nodes],
            cpus=total.get("CPU", 0.0),
            gpus=total.get("GPU", 0.0),
            largest_node_cpus=max((n["Resources"].get("CPU", 0.0) for n in nodes), default=0.0),
        )
    finally:
        ray.shutdown()


def check_address(address: str | None) -> None:
    """Ray waits a long time for a head that is not there; a plain TCP connect answers in seconds."""
    if address is None or address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise PelabError(f"address: {address!r} is not HOST:PORT; allowed: auto, HOST:PORT (the head's GCS port)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise PelabError(
            f"address: cannot join a Ray cluster at {address}: {e.strerror or e} "
            "(is `ray start --head` running there, and is the port open?)"
        ) from None


def _node_name() -> str:
    import ray

    return f"{socket.gethostname()} ({ray.util.get_node_ip_address()})"


def _probe() -> dict[str, str]:
    """Runs on each node before the study: which pelab and torch would train there."""
    from pelab.train import versions

    return {**versions(), "node": _node_name()}


def _train_task(
    cfgs_json: list[str], device: str, threads: int, want_checkpoint: bool, carried: list[dict] | None = None
) -> list[tuple[str, bytes | None]]:
    """One group on whichever node Ray chose; returns each run's result and its checkpoint's bytes. The driver's
    plugins come with it (``pelab.plugins.carried``: the code and its hash; a node need not have the file), and
    are loaded, hash checked, before any config is read."""
    from pelab import plugins
    from pelab.train import train_group

    plugins.restore(carried)
    cfgs = [RunConfig.model_validate_json(c) for c in cfgs_json]
    out = []
    with tempfile.TemporaryDirectory(prefix="pelab-") as tmp:
        ckpts = [Path(tmp) / f"{c.run_id}.safetensors" if want_checkpoint else None for c in cfgs]
        for result, ckpt in zip(
            train_group(cfgs, device=device, threads=threads, checkpoints=ckpts), ckpts, strict=True
        ):
            blob = ckpt.read_bytes() if ckpt is not None and ckpt.exists() else None
            result.host = _node_name()
            out.append((result.model_dump_json(), blob))
    return out


def check_nodes(cluster: Cluster) -> None:
    """Refuse to mix code: every node must run this driver's pelab (to the source file) and torch."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from pelab.train import versions

    here = versions()
    probe = ray.remote(_probe)
    nodes = _alive_nodes(ray)
    refs = [
        probe.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
        ).remote()
        for n in nodes
    ]
    for node, ref in zip(nodes, refs, strict=True):
        where = node["NodeManagerAddress"]
        try:
            there = ray.get(ref, timeout=PROBE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise PelabError(f"address: node {where} did not answer within {PROBE_TIMEOUT_S:.0f}s") from None
        except ray.exceptions.RayError as e:
            raise PelabError(
                f"address: node {where} cannot run pelab ({_first_line(e)}); install pelab[ray] on every node"
            ) from None
        for key in ("pelab", "pelab_source", "torch"):
            if there.get(key) != here.get(key):
                raise PelabError(
                    f"address: node {where} has {key} {there.get(key)} but this driver has {here.get(key)}; "
                    "install the same pelab and torch on every node"
                )


def _first_line(e: BaseException) -> str:
    cause = getattr(e, "cause", None)
    if cause is not None and cause is not e:
        return f"{type(cause).__name__}: {_first_line(cause)}"
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def gpu_share(use_gpu: bool, runs_per_gpu: int) -> float:
    """The fraction of a GPU one run reserves on Ray: 1/runs_per_gpu, so Ray packs that many onto each GPU (Ray
    accepts fractions below 1 as shares of a single GPU)."""
    return 1.0 / runs_per_gpu if use_gpu else 0.0


def run_ray(
    groups: Iterable[list[RunConfig]],
    on_result: OnResult,
    cluster: Cluster,
    workers: int | None = None,
    threads: int = 1,
    device: str = "auto",
    checkpoint_dir: str | Path | None = None,
    retries: int = DEFAULT_RETRIES,
    runs_per_gpu: int = 1,
    carried: list[dict] | None = None,
) -> None:
    """Run every group (one arm's seeds) as a Ray task, at most ``workers`` in flight (default: all, Ray queues
    them by CPUs). On GPUs each group reserves 1/``runs_per_gpu`` of one, so that many share it. ``carried``:
    the driver's plugins, sent with every task."""
    import ray

    use_gpu = device.startswith("cuda") or (device == "auto" and cluster.gpus > 0)
    if use_gpu and cluster.gpus == 0:
        raise PelabError(f"device: {device!r} asked for but the Ray cluster has no GPUs; allowed here: auto, cpu")
    if threads > cluster.largest_node_cpus:
        raise PelabError(
            f"threads: {threads} per run, but the largest Ray node has {cluster.largest_node_cpus:g} CPU(s)"
        )
    task = ray.remote(_train_task)
    options = dict(
        num_cpus=threads, num_gpus=gpu_share(use_gpu, runs_per_gpu), max_retries=retries, retry_exceptions=False
    )
    run_device = "cuda" if use_gpu else "cpu"  # Ray's CUDA_VISIBLE_DEVICES makes "cuda" the task's own GPU
    pending = [list(g) for g in groups]
    limit = workers or max(1, len(pending))
    inflight: dict[Any, list[RunConfig]] = {}
    # If this loop is interrupted (Ctrl-C), nothing half-done is stored, and leaving Ray ends the job's tasks:
    # ``connect`` shuts down an instance it started, and a cluster drops a departed driver's tasks. No
    # ray.cancel(force=True): cancelling a task as it completes can abort the driver inside Ray's core
    # ("Tried to complete task that was not pending", seen with Ray 2.60 in 1 of 8 Ctrl-Cs).
    while pending or inflight:
        while pending and len(inflight) < limit:
            cfgs = pending.pop(0)
            ref = task.options(**options, name=f"pelab-run-{cfgs[0].run_id}").remote(
                [c.model_dump_json() for c in cfgs], run_device, threads, checkpoint_dir is not None, carried
            )
            inflight[ref] = cfgs
        try:
            done, _ = ray.wait(list(inflight), num_returns=1, timeout=5.0)
        except ray.exceptions.RayError as e:  # the cluster itself is gone (its head, or our link to it)
            raise PelabError(
                f"address: lost the Ray cluster ({_first_line(e)}); run the same command again to resume"
            ) from None
        for ref in done:
            cfgs = inflight.pop(ref)
            for cfg, result in zip(cfgs, _collect(ray, ref, cfgs, checkpoint_dir, retries), strict=True):
                on_result(cfg, result)


def _collect(
    ray: Any, ref: Any, cfgs: list[RunConfig], checkpoint_dir: str | Path | None, retries: int
) -> list[RunResult]:
    def failed(reason: str) -> list[RunResult]:
        return [RunResult(run_id=c.run_id, status="failed", host=platform.node(), reason=reason) for c in cfgs]

    try:
        out = ray.get(ref)
    except ray.exceptions.RayTaskError as e:  # raised inside the task: the runs' own fault, not retried
        return failed(f"Ray task raised {_first_line(e)}")
    except ray.exceptions.RayError as e:  # its worker or node died, and kept dying
        return failed(f"lost after {retries} retries: {_first_line(e)}")
    results = []
    for cfg, (result_json, blob) in zip(cfgs, out, strict=True):
        results.append(RunResult.model_validate_json(result_json))
        if blob is not None and checkpoint_dir is not None:
            write_atomic(checkpoint_file(checkpoint_dir, cfg.run_id), blob)  # whole or absent, like its row
    return results
