"""The Ray backend: same database as the local backend, resumable after a crash, survives a lost node.

Ray runs only inside network namespaces these tests create (tests/netns.py): a
loopback-only "host" for a single-node instance, and two hosts joined by a veth
pair for a real two-node cluster. Root only, as in CI; skipped elsewhere.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netns import Netns, link, unavailable
from netns import ray_env as ray_environment

from pelab.config import RunConfig, build
from pelab.study.store import DB_NAME

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'pelab[ray]'")
WHY_NOT = unavailable()
needs_netns = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))
pytestmark = pytest.mark.xdist_group("ray")  # one Ray instance at a time (tests/conftest.py)

STUDY = """
name = "raytest"
seeds = [0, 1]
[task]
name = "reverse"
length = 6
vocab = 8
[model]
d = 16
n_heads = 2
[train]
steps = {steps}
eval_batches = 2
[axes]
"model.position.scheme" = ["sinusoidal", "learned"]
"model.combine" = ["add", "concat_split", "concat_wide"]
"""
#: Six groups of two seeds. A group's seeds are stored together, so "one more stored run" can be two: with four
#: groups, a Ctrl-C that left one group to run let the SIGKILL land after the last one (8 of 8 stored, seen in CI
#: on 2026-11-26); with six, at least two groups are left for the SIGKILL phase.
N_RUNS = 12
#: Long enough that a group of two seeds takes a few seconds even on a fast CPU: each interruption must land while
#: groups are still running (at 300 steps, on an AVX-512 Xeon, all 8 runs were stored before Ctrl-C arrived).
STEPS = 1200
COMPARED = "run_id, config, status, metrics, evals, curve, params, flops_per_token"


def rows(out: Path, what: str = COMPARED) -> list[tuple]:
    with sqlite3.connect(out / DB_NAME) as conn:
        return conn.execute(f"SELECT {what} FROM runs ORDER BY run_id").fetchall()


def count(out: Path) -> int:
    try:
        with sqlite3.connect(out / DB_NAME) as conn:
            return conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def checkpoints(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "checkpoints").glob("*.safetensors"))}


@pytest.fixture(scope="module")
def study_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = tmp_path_factory.mktemp("raystudy") / "raytest.toml"
    f.write_text(STUDY.format(steps=STEPS))
    return f


@pytest.fixture(scope="module")
def local_reference(study_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same study on the local backend, one thread per run: what Ray must reproduce bit for bit."""
    out = tmp_path_factory.mktemp("local") / "out"
    r = pelab("study", str(study_file), "--out", str(out), "--workers", "2", "--threads", "1", "--no-report")
    assert r.returncode == 0, r.stderr
    assert len(rows(out)) == N_RUNS
    return out


@pytest.fixture
def ray_env() -> Iterator[dict[str, str]]:
    """``netns.ray_env``, as a fixture: every Ray process of the test gets it."""
    with ray_environment() as env:
        yield env


def pelab(
    *args: str, ns: Netns | None = None, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """The CLI; under Ray, run it from ``cwd`` (Ray puts the driver's working directory on its workers' path)."""
    argv = [sys.executable, "-m", "pelab", *args]
    return subprocess.run(
        ns.command(*argv) if ns else argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


def interrupt(ns: Netns, argv: list[str], env: dict[str, str], out: Path, sig: int) -> tuple[int, str]:
    """Start a driver, let it store one more run, then send it ``sig``; its exit code and output."""
    before = count(out)
    driver = ns.popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: count(out) > before or driver.poll() is not None, 240, "one more stored run")
        assert driver.poll() is None, driver.communicate()[0]
        driver.send_signal(sig)
        log, _ = driver.communicate(timeout=120)
    finally:
        driver.kill()
        driver.wait()
    return driver.returncode, log


def start_cluster(
    head: Netns, worker: Netns, head_ip: str, worker_ip: str, port: str, head_env: dict, worker_env: dict
) -> None:
    """A Ray head in one namespace and a worker node in the other, one CPU each, as a user would start them."""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    node = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--disable-usage-stats"]
    head.run(ray_bin, "start", "--head", "--node-ip-address", head_ip, "--port", port,
             "--include-dashboard=false", *node, env=head_env)  # fmt: skip
    worker.run(ray_bin, "start", "--address", f"{head_ip}:{port}", "--node-ip-address", worker_ip,
               *node, env=worker_env)  # fmt: skip


def running_on(ns: Netns) -> list[str]:
    """Run ids in flight on a host: Ray titles a busy worker process ``ray::<task name>``."""
    found = []
    for pid in ns.pids():
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if title.startswith("ray::pelab-run-"):
            found.append(title.removeprefix("ray::pelab-run-").strip())
    return found


def wait_for(predicate, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@needs_netns
def test_single_node_matches_local_and_resumes_after_ctrl_c_and_sigkill(
    study_file: Path, local_reference: Path, ray_env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "ray"
    args = ["-m", "pelab", "study", str(study_file), "--out", str(out), "--backend", "ray", "--no-report"]
    with Netns("single") as ns:
        rc, log = interrupt(ns, [sys.executable, *args], ray_env, out, signal.SIGINT)  # Ctrl-C
        assert rc == 130 and "pelab: interrupted" in log, (rc, log)
        wait_for(lambda: not ns.pids(), 30, "Ray to stop after Ctrl-C")  # nothing left running
        after_ctrl_c = {r[0]: r for r in rows(out)}
        rc, log = interrupt(ns, [sys.executable, *args], ray_env, out, signal.SIGKILL)  # the driver crashes
        assert f"{len(after_ctrl_c)} already stored" in log, log
        partial = {r[0]: r for r in rows(out)}
        assert len(after_ctrl_c) < len(partial) < N_RUNS, "each interruption should land mid-study"

        r = pelab(*args[2:], ns=ns, env=ray_env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"{len(partial)} already stored, {N_RUNS - len(partial)} to run on a local Ray instance" in r.stdout
        assert "1 node(s), " in r.stdout

    resumed = rows(out)
    assert len(resumed) == N_RUNS and all(r[2] == "done" for r in resumed)
    assert resumed == rows(local_reference)  # same metrics, evals, curves, bit for bit
    for row in resumed:
        if row[0] in partial:
            assert row == partial[row[0]]  # finished runs were not redone
    assert checkpoints(out) == checkpoints(local_reference)  # the weights came back from Ray intact
    hosts = {h for (h,) in rows(out, "host")}
    assert hosts and all(h.endswith("(127.0.0.1)") for h in hosts), hosts  # Ray stayed on loopback


@needs_netns
def test_two_hosts_drop_an_interrupted_driver_and_survive_a_lost_node(
    study_file: Path, local_reference: Path, ray_env: dict[str, str], tmp_path: Path
) -> None:
    head_ip, worker_ip, port = "10.77.0.1", "10.77.0.2", "6380"
    out = tmp_path / "cluster"
    with Netns("head") as head, Netns("worker") as worker:
        link(head, worker, head_ip, worker_ip)
        start_cluster(head, worker, head_ip, worker_ip, port, ray_env, ray_env)

        # Ctrl-C on a driver whose runs are training on both nodes: the driver leaves, the cluster drops its tasks.
        slow = tmp_path / "slow.toml"
        slow.write_text(STUDY.format(steps=5000))
        argv = [sys.executable, "-m", "pelab", "study", str(slow), "--out", str(tmp_path / "slow"), "--backend",
                "ray", "--address", f"{head_ip}:{port}", "--no-report"]  # fmt: skip
        driver = head.popen(argv, env=ray_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for(lambda: (running_on(head) and running_on(worker)) or driver.poll() is not None, 120, "both busy")
            driver.send_signal(signal.SIGINT)
            log, _ = driver.communicate(timeout=120)
        finally:
            driver.kill()
            driver.wait()
        assert driver.returncode == 130 and "pelab: interrupted" in log, (driver.returncode, log)
        wait_for(lambda: not running_on(head) and not running_on(worker), 30, "the cluster to drop the runs")

        argv = [sys.executable, "-m", "pelab", "study", str(study_file), "--out", str(out), "--backend", "ray",
                "--address", f"{head_ip}:{port}", "--no-report"]  # fmt: skip
        driver = head.popen(argv, env=ray_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            on_worker = lambda: any(worker_ip in h for (h,) in rows(out, "host")) if count(out) else False  # noqa: E731
            wait_for(lambda: on_worker() or driver.poll() is not None, 240, "a run finished on the worker node")
            assert driver.poll() is None, driver.stdout.read() if driver.stdout else ""
            wait_for(lambda: running_on(worker), 60, "the worker node to take its next run")
            stored_before_kill, lost = count(out), running_on(worker)
            worker.kill_all()  # the worker node loses power mid-run
            log, _ = driver.communicate(timeout=400)
        finally:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, log
    assert "2 node(s), 2 CPU(s)" in log
    assert stored_before_kill < N_RUNS, "the node should be lost mid-study"
    assert lost, "a run was in flight on the node that died"
    assert f"{N_RUNS} run(s) in" in log and "0 failed" in log, log
    final = rows(out)
    assert len(final) == N_RUNS and len({r[0] for r in final}) == N_RUNS  # every run exactly once
    assert all(r[2] == "done" for r in final)
    assert final == rows(local_reference)
    hosts = [h for (h,) in rows(out, "host")]
    assert any(worker_ip in h for h in hosts) and any(head_ip in h for h in hosts), hosts  # spread over both
    host_of = dict(rows(out, "run_id, host"))
    for run_id in lost:  # retried on the surviving node, stored once, identical to the local run
        assert head_ip in host_of[run_id], (run_id, host_of[run_id])


@needs_netns
def test_unreachable_head_is_one_line_and_nothing_stored(
    ray_env: dict[str, str], study_file: Path, tmp_path: Path
) -> None:
    with Netns("nohead") as ns:
        r = pelab("study", str(study_file), "--out", str(tmp_path / "o"), "--backend", "ray",
                  "--address", "127.0.0.1:1", ns=ns, env=ray_env)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        r.stderr.strip().splitlines()[-1].startswith("pelab: error: address: cannot join a Ray cluster at 127.0.0.1:1")
    ), r.stderr
    assert count(tmp_path / "o") == 0


@needs_netns
def test_a_node_running_other_pelab_code_is_refused(ray_env: dict[str, str], study_file: Path, tmp_path: Path) -> None:
    """Same version string, one edited file: the driver refuses the cluster before any run."""
    from pelab import __file__ as package_init

    patched = Path(tempfile.mkdtemp(prefix="plp"))
    shutil.copytree(Path(package_init).parent, patched / "pelab")
    with open(patched / "pelab" / "model.py", "a") as f:
        f.write("\n# a local edit on one node\n")
    head_ip, worker_ip, port = "10.78.0.1", "10.78.0.2", "6381"
    try:
        with Netns("head") as head, Netns("worker") as worker:
            link(head, worker, head_ip, worker_ip)
            start_cluster(head, worker, head_ip, worker_ip, port, ray_env, {**ray_env, "PYTHONPATH": str(patched)})
            r = pelab("study", str(study_file), "--out", str(tmp_path / "o"), "--backend", "ray",
                      "--address", f"{head_ip}:{port}", ns=head, env=ray_env, cwd=tmp_path)  # fmt: skip
    finally:
        shutil.rmtree(patched)
    assert r.returncode == 2, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"pelab: error: address: node {worker_ip} has pelab_source "), r.stderr
    assert "install the same pelab and torch on every node" in last
    assert count(tmp_path / "o") == 0


# --- without a cluster: how results are classified, and the one-line errors ---------------------------


class _FakeRay:
    """Just enough of the ray module for ``_collect``: ``get`` raises what a real cluster would."""

    def __init__(self, error: BaseException | None = None, value: object = None) -> None:
        self.exceptions = ray.exceptions
        self.error, self.value = error, value

    def get(self, ref: object) -> object:
        if self.error is not None:
            raise self.error
        return self.value


def _cfg() -> RunConfig:
    return build(RunConfig, task=dict(name="reverse", length=4, vocab=6), model=dict(d=8, n_heads=1))


def test_a_lost_node_after_retries_is_a_failed_run_naming_the_retries() -> None:
    from pelab.study.ray_backend import _collect

    cfg = _cfg()
    (result,) = _collect(_FakeRay(ray.exceptions.NodeDiedError("node 10.0.0.2 died")), "ref", [cfg], None, retries=3)
    assert result.status == "failed" and result.run_id == cfg.run_id
    assert result.reason.startswith("lost after 3 retries: ") and "node 10.0.0.2 died" in result.reason


def test_an_exception_inside_the_task_is_a_failed_run_not_a_retry() -> None:
    from pelab.study.ray_backend import _collect

    err = ray.exceptions.RayTaskError("_train_task", "Traceback ...", ValueError("bad corpus"))
    (result,) = _collect(_FakeRay(err), "ref", [_cfg()], None, retries=3)
    assert result.status == "failed" and "ValueError: bad corpus" in result.reason
    assert "retries" not in result.reason


def test_a_result_and_its_checkpoint_are_stored_whole(tmp_path: Path) -> None:
    from pelab.records import RunResult
    from pelab.study.ray_backend import _collect

    cfg = _cfg()
    sent = RunResult(run_id=cfg.run_id, status="done", metrics={"acc": 0.5}, host="n (10.0.0.2)")
    (result,) = _collect(_FakeRay(value=[(sent.model_dump_json(), b"weights")]), "ref", [cfg], tmp_path, retries=3)
    assert result == sent
    assert (tmp_path / f"{cfg.run_id}.safetensors").read_bytes() == b"weights"
    assert not list(tmp_path.glob("*.part"))


def test_cluster_too_small_or_without_gpus_is_refused_before_any_run() -> None:
    from pelab.errors import PelabError
    from pelab.study.ray_backend import Cluster, run_ray

    cluster = Cluster("x:1", False, ["10.0.0.1"], cpus=4, gpus=0, largest_node_cpus=2)
    with pytest.raises(PelabError, match=r"^threads: 3 per run, but the largest Ray node has 2 CPU\(s\)$"):
        run_ray([[_cfg()]], lambda c, r: None, cluster, threads=3)
    with pytest.raises(PelabError, match=r"^device: 'cuda' asked for but the Ray cluster has no GPUs"):
        run_ray([[_cfg()]], lambda c, r: None, cluster, device="cuda")


def test_bad_backend_options_are_one_line_errors(tmp_path: Path, study_file: Path) -> None:
    from pelab.errors import PelabError
    from pelab.study.driver import run_study
    from pelab.study.grid import load_study
    from pelab.study.ray_backend import check_address

    with pytest.raises(PelabError, match=r"^address: 'nohost' is not HOST:PORT; allowed: auto, HOST:PORT"):
        check_address("nohost")
    study = load_study(study_file)
    with pytest.raises(PelabError, match=r"^address: only used with --backend ray$"):
        run_study(study, tmp_path / "o", address="10.0.0.1:6379", quiet=True)
    with pytest.raises(PelabError, match=r"^backend: unknown value 'dask'; allowed: local, ray$"):
        run_study(study, tmp_path / "o", backend="dask", quiet=True)
    assert not (tmp_path / "o").exists()


def test_without_ray_installed_the_error_says_how_to_install_it(
    tmp_path: Path, study_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from pelab.errors import PelabError
    from pelab.study.driver import run_study
    from pelab.study.grid import load_study

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(PelabError, match=r"pip install 'pelab\[ray\]'$"):
        run_study(load_study(study_file), tmp_path / "o", backend="ray", quiet=True)
    assert not (tmp_path / "o").exists()
