"""Two GL hosts simulated on this machine: a Dask scheduler process and two
`python -m shadertune.cluster worker` processes, one owning GPU 0 (serving GL and CUDA),
the other GPU 1 (GPU 0 again on llvmpipe, which has one EGL device) and GPU 9 (an EGL
device that does not exist), and the search CLI joining them with --cluster.  The
same test runs on llvmpipe here and on the GPU machine.
Mid-search one worker process is killed (kill -9) and then the scheduler is killed and
started again on its port: the search finishes on the rest, every measured result is
in the store exactly once, the CLI says which worker went and why, and a rerun resumes
from the store.  Real processes, real signals, real GL."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

pytest.importorskip("distributed")

from subproc import popen_python                                         # noqa: E402

from shadertune.core.config import Config                                    # noqa: E402
from shadertune.db import Store                                         # noqa: E402
from shadertune.core.problem import Problem                                  # noqa: E402
from shadertune.cli.search import main                                  # noqa: E402
from shadertune.search.report_json import check_report                  # noqa: E402

P = Problem(40, 36, 44)          # small, and no tile divides it
BUDGET = 24


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SCHEDULER = """
import asyncio, sys
from distributed import Scheduler
async def serve():
    async with Scheduler(host="127.0.0.1", port=int(sys.argv[1]), dashboard=False,
                         dashboard_address="127.0.0.1:0") as s:
        await s.finished()
asyncio.run(serve())
"""


def scheduler(port: int) -> subprocess.Popen:
    """A Dask scheduler process on `port` (what `dask scheduler` runs; its command needs
    click, which the GPU machine may lack), once it takes connections."""
    p = popen_python(SCHEDULER, port, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            assert p.poll() is None and time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.05)


def worker_pids(address: str, names: set) -> dict:
    """{name: pid} of the workers named `names`, once all of them have joined (asked
    through a client of our own)."""
    from distributed import Client
    with Client(address, timeout=30) as c:
        deadline = time.monotonic() + 60
        while True:
            found = {w["name"]: a for a, w in c.scheduler_info(n_workers=-1)["workers"].items()}
            if names <= set(found):
                break
            assert time.monotonic() < deadline, f"workers {names - set(found)} did not join"
            time.sleep(0.1)
        pids = c.run(os.getpid, workers=[found[n] for n in names])
        return {n: pids[found[n]] for n in names}


class Lines:
    """A child's stderr, read line by line as it comes (on a thread)."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)


def stored(db) -> list:
    """The store's GL results for P, every device."""
    if not db.exists():
        return []
    with Store(db) as s:
        return [r for d in s.summary(("device",), "backend = ?", ["gl"])
                for r in s.results("gl", d["device"], P)]


def second_gpu() -> int:
    """EGL device 1 where there is one (the GPU machine), else 0 (llvmpipe)."""
    from shadertune.backends.gl import GLBackend
    from shadertune.errors import ContextError
    try:
        GLBackend(device_index=1).device()
        return 1
    except ContextError:
        return 0


def hosts_logs(where) -> str:
    return "\n".join(f"--- {p.name}:\n{p.read_text()[-4000:]}" for p in sorted(where.glob("host*.log")))


def test_a_gl_search_on_two_hosts_survives_a_killed_worker_and_a_scheduler_restart(
        gl, tmp_path, capsys):
    b = second_gpu()
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    db, rep = tmp_path / "t.sqlite", tmp_path / "r.json"
    procs = [scheduler(port)]
    common = ["--host", "127.0.0.1", "--rejoin", "60"]
    # the hosts' logs go to files: a pipe nobody reads fills up with a scheduler restart's
    # reconnection messages and blocks the worker writing them
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("hostA", "hostB")}
    host_a = popen_python(None, "-m", "shadertune.cluster", "worker", address, "--gpus", "0",
                          "--name", "hostA", "--backends", "gl,cuda", *common,
                          stdout=subprocess.DEVNULL, stderr=logs["hostA"], start_new_session=True)
    host_b = popen_python(None, "-m", "shadertune.cluster", "worker", address, "--gpus", f"{b},9",
                          "--name", "hostB", "--backends", "gl", *common,
                          stdout=subprocess.DEVNULL, stderr=logs["hostB"], start_new_session=True)
    procs += [host_a, host_b]
    args = ["-m", "shadertune.search", "--backend", "gl", "--m", P.M, "--n", P.N, "--k", P.K,
            "--budget", BUDGET, "--repeats", "2", "--db", db, "--cluster", address]
    try:
        pids = worker_pids(address, {"hostA-gpu0", f"hostB-gpu{b}", "hostB-gpu9"})
        search = popen_python(None, *args, "--report", rep, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, start_new_session=True)
        procs.append(search)
        err = Lines(search.stderr)
        deadline = time.monotonic() + 120

        def until(what, done):
            while not done():
                assert search.poll() is None, err.text()
                assert time.monotonic() < deadline, \
                    f"waited in vain for {what}: {err.text()}\n{hosts_logs(tmp_path)}"
                time.sleep(0.05)
        until("4 results", lambda: len(stored(db)) >= 4)
        killed = pids[f"hostB-gpu{b}"]
        os.kill(killed, signal.SIGKILL)               # a worker process dies mid-search
        until("the report of its death", lambda: " died: " in err.text())
        at = len(stored(db))
        until("3 more results", lambda: len(stored(db)) >= at + 3)
        procs[0].kill()                               # the scheduler dies, and is started again
        procs[0].wait()
        procs[0] = scheduler(port)
        out = search.stdout.read()
        search.wait(timeout=max(1, deadline - time.monotonic()))
        err.thread.join(10)
        assert search.returncode == 0, err.text()
        lines, err = err.lines, err.text()
        said = [ln for ln in lines if f"worker hostB-gpu{b} " in ln and " died: " in ln]
        assert said and said[0].endswith(
            "died: its process was killed by signal 9 (SIGKILL); its evaluation runs again "
            "on another worker, and its nanny restarts it"), err
        assert f"pid {killed} " in said[0]
        assert any(ln.startswith("shadertune.search: worker hostB-gpu9 (GPU 9) excluded: cannot "
                                 "create a headless EGL GL context") for ln in lines), err
        assert any(ln.startswith("shadertune.search: connected to the scheduler again (restarted)")
                   for ln in lines), err
        per_worker = next(ln for ln in out.splitlines() if ln.startswith("evaluations per worker: "))
        assert "hostA-gpu0 " in per_worker and f"hostB-gpu{b} " in per_worker, out
        # every measured result in the store exactly once: the store holds the search's configs
        (entry,) = json.loads(rep.read_text())["problems"]
        check_report(json.loads(rep.read_text()))
        assert entry["evaluated"] == BUDGET
        kept = stored(db)
        assert sorted(r.config.key for r in kept) == \
            sorted(Config(r["config"]).key for r in entry["results"])
        assert len({r.config.key for r in kept}) == len(kept) == BUDGET
        # a rerun resumes from the store: what the first run measured is replayed, nothing
        # is measured twice; the first run spent part of its count budget on configs timed
        # ahead that its search never asked for (docs/cluster.md), so the rerun's search may
        # go a few configs further along the same path, measuring each of them once
        assert main([str(a) for a in args[2:]] + ["-q"]) == 0
        out = capsys.readouterr().out
        total = re.search(r"total (\d+) measured, (\d+) replayed from the store", out)
        assert total, out
        measured, replayed = int(total[1]), int(total[2])
        assert measured + replayed == BUDGET and measured <= BUDGET // 2, out
        again = stored(db)
        assert len({r.config.key for r in again}) == len(again) == BUDGET + measured
        # the same cluster serves CUDA from hostA's worker where CuPy and a GPU are there
        # (once hostA's worker is back: its host restarts it after the scheduler's restart)
        worker_pids(address, {"hostA-gpu0"})
        code = main(["--backend", "cuda", "--size", "64", "--budget", "2", "-q", "--db",
                     str(tmp_path / "cuda.sqlite"), "--cluster", address])
        err = capsys.readouterr().err
        try:
            import cupy  # noqa: F401
            has_cuda = cupy.cuda.runtime.getDeviceCount() > 0
        except Exception:
            has_cuda = False
        if has_cuda:
            assert code == 0, err
        else:
            assert code == 1 and "no worker could open backend 'cuda': hostA-gpu0: " in err, err
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for f in logs.values():
            f.close()

