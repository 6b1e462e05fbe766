"""shadertune.cluster on a real local Dask cluster of 2 worker processes with fake GPUs
(tests/cluster_fakes.py): batches, devices, faults, the CLI.  One cluster for the module."""
import json
import os
import pathlib
import pickle
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("distributed")

from cluster_fakes import OneKind                                          # noqa: E402
from fake_backend import FakeBackend, best_correct, cost_ms               # noqa: E402
from subproc import child_env, popen_python, run_python, wait_ended       # noqa: E402

from shadertune.cluster import ClusterEvaluator, Coordinator, local_cluster, tune_table  # noqa: E402
from shadertune.core.config import Config                                      # noqa: E402
from shadertune.db import Store                                           # noqa: E402
from shadertune.core.problem import Problem                                    # noqa: E402
from shadertune.search import Budget, Evaluator, tune                     # noqa: E402
from shadertune.cli.search import main                                    # noqa: E402
from shadertune.search.report_json import check_report                    # noqa: E402
from shadertune.search.restrict import narrow                             # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
P = Problem(8, 8, 64)
P2 = Problem(8, 8, 32)
ONE, TWO, ODD = "cluster_fakes:OneKind", "cluster_fakes:TwoKinds", "cluster_fakes:OddHasNoContext"
MODEL = "cluster_fakes:ModelKind"
KEY = "fake renderer | 1.0"


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    return tmp_path_factory.mktemp("cluster-control")


@pytest.fixture(scope="module")
def client(control):
    with local_cluster([0, 1], [ONE, TWO, ODD, MODEL], env={"CLUSTER_FAKE_DIR": str(control),
                                    "PYTHONPATH": child_env()["PYTHONPATH"]}) as c:
        yield c


def live_workers(client, n, timeout=60):
    """Wait until the cluster has n workers (a killed one is restarted by its nanny)."""
    client.wait_for_workers(n, timeout=timeout)


def coordinator(client, spec=ONE, events=None):
    return Coordinator(client, spec, on_event=(events.append if events is not None else None))


def rows(store_path, device=KEY, problem=P):
    with Store(store_path) as s:
        return s.results("fake", device, problem)


def test_a_config_pickled_in_one_process_hashes_as_its_equals_in_another(tmp_path):
    code = ("import pickle, sys; from shadertune.core.config import Config; "
            "sys.stdout.buffer.write(pickle.dumps(Config(glsl='450', np=22)))")
    blob = run_python(code, text=False, check=True).stdout
    c = pickle.loads(blob)
    assert c in {Config(glsl="450", np=22)} and hash(c) == hash(Config(np=22, glsl="450"))


@pytest.mark.parametrize("mode", ["bar", "lines"])
def test_progress_counts_evaluations_per_worker_and_in_total(mode):
    import io
    from shadertune.cli.search_cluster import workers_line
    from shadertune.search.progress import Progress
    r = Evaluator(FakeBackend(), P, repeats=2)(best_correct(FakeBackend().space(P)))
    s = io.StringIO()
    bar = Progress("2 problems on 2 workers", total=6, stream=s, mode=mode)
    for worker in ("gpu1", "gpu0", "gpu1"):
        bar.update(r, False, worker)
    bar.update(r, True, None)
    if mode == "lines":
        assert "4/6 evaluations (1 cached)" in bar.status()
        assert "per worker: gpu0 1, gpu1 2" in bar.status()
    bar.close()
    text = s.getvalue()
    assert "per worker: gpu0 1, gpu1 2" in text.splitlines()[-1]
    assert ("4/6" if mode == "bar" else "done: 4 evaluations (1 cached)") in text
    assert workers_line(bar) == ("evaluations per worker: gpu0 1, gpu1 2; total 3 measured, "
                                 "1 replayed from the store")


def test_many_farms_a_batch_out_over_both_workers_and_the_coordinator_writes_it(
        client, control, tmp_path):
    live_workers(client, 2)
    (control / "precompiled").unlink(missing_ok=True)
    coord = coordinator(client)
    (group,) = coord.groups.values()
    assert sorted(group.live.values()) == ["gpu0", "gpu1"] and group.device.key == KEY
    base = dict(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
    batch = [Config(base, np=n) for n in (16, 18, 20, 22, 24, 26)] + [
        Config(base, glsl="330", mc="2x2"),             # wrong
        Config(base, mrt_h=4, mrt_w=2),                 # unwritten (NaN)
        Config(base, fetch="texture", unroll="full", np=16),   # fails to compile
        Config(base, np=6),                             # invalid at build
        Config(base, np=22), Config(base, np=16)]       # repeats
    seen = []
    with Store(tmp_path / "t.sqlite") as store:
        ev = ClusterEvaluator(group, P, store=store, repeats=3,
                              on_result=lambda r, cached, worker: seen.append((r, cached, worker)))
        got = ev.many(batch)
        local = Evaluator(FakeBackend(), P, repeats=3)
        assert [r.config for r in got] == batch
        assert [r.status for r in got] == [local(c).status for c in batch]
        assert [r.status for r in got[6:10]] == ["wrong", "wrong", "compile_failed", "invalid"]
        assert got[10] is got[3] and got[11] is got[0]          # each config evaluated once
        assert ev.measured == 10 == len(seen) and {w for _, _, w in seen} == {"gpu0", "gpu1"}
        assert all(r.device == KEY and r.backend == "fake" for r in got)
        assert sorted(r.config.key for r in rows(tmp_path / "t.sqlite")) == \
            sorted({c.key for c in batch})                      # written once each, here
        # the batch was announced first: the workers precompiled it, each config once
        # (CUDA: NVRTC in parallel; chunks side by side on the two workers)
        assert sorted((control / "precompiled").read_text().split()) == sorted(
            dict.fromkeys(c.key for c in batch))
        with Store(tmp_path / "t.sqlite") as s:                 # with its measuring time
            assert s.measured_seconds("fake", KEY, P, "fake-templates-1", batch)[1] == 0
        # a second search replays the store: nothing goes to the workers
        seen.clear()
        again = ClusterEvaluator(group, P, store=store, repeats=3,
                                 on_result=lambda r, cached, worker: seen.append((cached, worker)))
        assert [r.status for r in again.many(batch)] == [r.status for r in got]
        assert again.measured == 0 and again.cached == 10 and set(seen) == {(True, None)}
        assert again(batch[3]).median_ms == got[3].median_ms     # __call__ is many([c])[0]


def test_a_batch_stops_starting_evaluations_when_told_and_returns_the_prefix(client):
    coord = coordinator(client)
    (group,) = coord.groups.values()
    base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
    batch = [Config(base, np=n) for n in range(8, 40, 2)]
    ev = ClusterEvaluator(group, P, repeats=2)
    got = ev.many(batch, stop=lambda: ev.measured >= 3)     # e.g. the time limit
    assert 3 <= len(got) < len(batch) and [r.config for r in got] == batch[:len(got)]
    assert ev.measured == len(got)                          # nothing started is lost


def test_the_scheduler_runs_in_its_own_process_and_ends_with_a_coordinator_killed_with_sigkill(
        control):
    # (scheduler_process.py) its own process: a core of its own for each evaluation's
    # messages; its end: a coordinator killed outright must not leave it serving
    import psutil
    code = """
        import os, sys, time
        from shadertune.cluster import local_cluster
        with local_cluster([0], [sys.argv[1]], env={"CLUSTER_FAKE_DIR": sys.argv[2]}) as c:
            print(os.getpid(), c.run_on_scheduler(os.getpid), flush=True)
            time.sleep(120)
        """
    p = popen_python(code, ONE, control, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        coordinator_pid, scheduler_pid = map(int, p.stdout.readline().split())
        assert coordinator_pid == p.pid and scheduler_pid != p.pid
        assert psutil.Process(scheduler_pid).ppid() == p.pid
    finally:
        p.kill()
        p.wait(30)
    wait_ended([scheduler_pid], 30, "the scheduler")


def test_a_scheduler_that_fails_to_start_says_why():
    with pytest.raises(RuntimeError, match=r"scheduler's process failed to start \(it exited "
                                           r"with status 1\): \w+") as e:
        with local_cluster([0], [ONE], host="bad-host.invalid"):
            pass
    assert "\n" not in str(e.value) and "Traceback" not in str(e.value)     # its reason, one line


def test_neither_workers_nor_scheduler_poll_nvml(client):
    # Dask's system monitor polls NVML on the event loops; where NVML answers slowly that
    # delays every evaluation's dispatch and return (notes/cluster.md)
    def nvml_state(dask_scheduler=None, dask_worker=None):
        import dask
        from distributed.diagnostics import nvml
        return dask.config.get("distributed.diagnostics.nvml"), nvml.NVML_STATE.name
    on_workers = client.run(nvml_state)
    assert len(on_workers) == 2
    for answer in [*on_workers.values(), client.run_on_scheduler(nvml_state)]:
        assert answer[0] is False and answer[1] != "INITIALIZED", answer


def test_the_servers_timers_run_at_the_slower_intervals(client):
    # a local cluster's scheduler and nannies share the coordinator's event loop: their
    # idle timers (loop tick, system monitor, memory monitor) at Dask's defaults cost the
    # coordinator as much CPU as the evaluations' dispatch (engine.DASK_CONFIG)
    def timers(dask_scheduler=None, dask_worker=None):
        server = dask_scheduler if dask_scheduler is not None else dask_worker
        pcs = server.periodic_callbacks
        return {"tick": pcs["tick"].callback_time, "monitor": pcs["monitor"].callback_time,
                "disk": server.monitor.monitor_disk_io,
                "memory": pcs["memory_monitor"].callback_time if "memory_monitor" in pcs else None}
    on_workers = client.run(timers)
    on_nannies = client.run(timers, nanny=True)
    assert len(on_workers) == len(on_nannies) == 2
    for answer in [*on_workers.values(), *on_nannies.values(), client.run_on_scheduler(timers)]:
        assert answer["tick"] == 500 and answer["monitor"] == 2000 and answer["disk"] is False, answer
    for answer in on_nannies.values():        # the nannies restart a worker past its memory limit
        assert answer["memory"] == 500, answer


def test_each_worker_runs_its_blas_on_its_share_of_the_hosts_cores(monkeypatch):
    # Dask's nannies start workers with one BLAS thread: the float64 reference of a
    # 3072^3 problem then took a worker's GPU thread 3 s on one core (engine.share_host_cores)
    import dask
    from shadertune.cluster import engine
    key = "distributed.nanny.pre-spawn-environ"
    before = dask.config.get(key)
    try:
        monkeypatch.setattr("shadertune.core.cpus.usable_cpus", lambda: 64)
        for v in engine.BLAS_THREAD_VARIABLES:
            monkeypatch.delenv(v, raising=False)
        engine.share_host_cores(4)
        got = dask.config.get(key)
        assert {v: got[v] for v in engine.BLAS_THREAD_VARIABLES} == dict.fromkeys(
            engine.BLAS_THREAD_VARIABLES, "16")
        assert got["MALLOC_TRIM_THRESHOLD_"] == before["MALLOC_TRIM_THRESHOLD_"]   # Dask's kept
        engine.share_host_cores(128)
        assert dask.config.get(key)["OPENBLAS_NUM_THREADS"] == "1"
        monkeypatch.setenv("OMP_NUM_THREADS", "3")               # the user's setting wins
        engine.share_host_cores(4)
        assert dask.config.get(key)["OMP_NUM_THREADS"] == "3"
    finally:
        dask.config.set({key: before})


def test_the_workers_environment_has_their_share_of_blas_threads(client):
    from shadertune.cluster.engine import BLAS_THREAD_VARIABLES
    from shadertune.core.cpus import usable_cpus
    share = str(max(1, usable_cpus() // 2))           # the module's cluster: 2 workers
    got = client.run(lambda: {v: os.environ.get(v) for v in BLAS_THREAD_VARIABLES})
    assert len(got) == 2
    for env in got.values():
        assert env == {v: os.environ.get(v, share) for v in BLAS_THREAD_VARIABLES}, env


def test_every_stream_of_the_cluster_batches_for_a_millisecond_not_dasks_2_to_10(client):
    # each evaluation's way out and back crosses four batched streams; at Dask's fixed
    # 10 / 5 / 2 / 2 ms a round trip waited up to 19 ms (engine.STREAM_INTERVAL)
    from shadertune.cluster.engine import STREAM_INTERVAL

    def scheduler_streams(dask_scheduler):
        return [b.interval for b in [*dask_scheduler.stream_comms.values(),
                                     *dask_scheduler.client_comms.values()]]

    def worker_stream(dask_worker):
        return [dask_worker.batched_stream.interval]
    on_scheduler = client.run_on_scheduler(scheduler_streams)
    on_workers = client.run(worker_stream)
    assert len(on_scheduler) >= 3 and len(on_workers) == 2      # 2 workers, the client(s)
    for interval in [client.scheduler_comm.interval, *on_scheduler, *sum(on_workers.values(), [])]:
        assert interval == STREAM_INTERVAL


def test_each_evaluation_goes_to_the_worker_with_the_fewest_in_flight_the_one_idle_longest(client):
    # the coordinator places evaluations itself (Dask's placement sent 123 of 128 to
    # one of two GPUs): never a second one to a worker while another is idle, and at
    # most EVALUATIONS_PER_WORKER (2: one running, one queued behind it) to any
    from shadertune.cluster.coordinator import EVALUATIONS_PER_WORKER
    assert EVALUATIONS_PER_WORKER == 2
    live_workers(client, 2)
    (group,) = coordinator(client).groups.values()
    first, second = group.acquire(), group.acquire()
    assert {first, second} == set(group.live)
    third, fourth = group.acquire(), group.acquire()
    assert {third, fourth} == set(group.live) and group.acquire() is None
    for a in (second, second, first):
        group.release(a)
    assert group.acquire() == second                 # none in flight (first: one)
    assert group.acquire() == second                 # one each: second was freed first
    assert group.acquire() == first and group.acquire() is None
    group.release(second)
    group.release(first)
    assert group.acquire() == second                 # one each: second was freed first
    assert group.acquire() == first and group.acquire() is None
    for a in (first, first, second, second):
        group.release(a)


def test_the_backend_hooks_come_from_a_worker(client):
    from cluster_fakes import ModelKind
    from shadertune.cluster import RemoteBackend
    coord = coordinator(client, MODEL)
    (group,) = coord.groups.values()
    remote, local = RemoteBackend(group), ModelKind()
    assert remote.default_strategy == "model" == group.backend.default_strategy
    assert remote.candidates(P, 2) == local.candidates(P, 2) and len(remote.candidates(P)) == 3
    configs = local.space(P).configs()[:50]
    assert remote.predict_ms(P, configs) == local.predict_ms(P, configs)
    assert remote.space(P).configs() == local.space(P).configs()
    assert remote.default_config(P) == local.default_config(P)
    assert remote.source(P, configs[0]) == local.source(P, configs[0])
    assert remote.device().key == KEY and remote.template_hash() == local.template_hash()


def test_a_call_answered_while_its_caller_polls_never_fails(client, control, monkeypatch):
    # distributed's blocking result(timeout) fails with UnboundLocalError when the
    # time-out and the answer meet (the CUDA half of bench-workers on two H100s);
    # the coordinator polls calls on done-callbacks instead, here every 5 ms
    from shadertune.cluster import coordinator as coord_mod
    monkeypatch.setattr(coord_mod, "CALL_POLL_SECONDS", 0.005)
    (group,) = coordinator(client).groups.values()
    base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
    configs = [Config(base, np=n) for n in range(8, 48, 2)]
    (control / "sleep").write_text("0.005")
    try:
        got = [group.backend.source(P, c) for c in configs]
    finally:
        (control / "sleep").unlink()
    assert got == [OneKind().source(P, c) for c in configs]


def test_a_whole_space_goes_to_the_cost_model_by_index_not_in_the_graph(client, control):
    import warnings
    import dask
    from cluster_fakes import ModelKind
    (control / "predicted").unlink(missing_ok=True)
    big = Problem(8, 8, 256)                        # about 51,000 configs: 2 MB pickled
    (group,) = coordinator(client, MODEL).groups.values()
    local = ModelKind()
    every = local.space(big).configs()
    assert len(every) > 40_000
    sample = every[::7]
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1MB"}), \
            warnings.catch_warnings():
        warnings.simplefilter("error")              # Dask's "Sending large graph" warning
        assert group.backend.predict_ms(big, every) == local.predict_ms(big, every)
        assert group.backend.predict_ms(big, sample) == local.predict_ms(big, sample)
    # a config outside the space is sent as itself
    odd = [Config(every[0], np=2000)] + every[:2000]
    assert group.backend.predict_ms(big, odd) == local.predict_ms(big, odd)
    assert group.backend.predict_ms(big, every[:5]) == local.predict_ms(big, every[:5])
    # a long ranking is host work, in the worker's ranking process (off the interpreter
    # lock its GPU thread needs); a mid one (a config outside the space) goes where calls
    # go; a short one (a climb's neighbours) is predicted here, by the host predictor,
    # and never reaches a worker (only the workers' processes log their predictions)
    threads = [line.split() for line in (control / "predicted").read_text().splitlines()]
    assert [(int(n), t.startswith("shadertune-gpu")) for n, t, _ in threads] == \
        [(len(every), False), (len(sample), False), (len(odd), True)]
    (_, _, child), (_, _, again), (_, _, worker) = threads
    assert child == again != worker


def test_a_worker_that_enumerates_a_space_differently_refuses_to_guess():
    from shadertune.cluster.worker import BackendPlugin
    from shadertune.errors import ShadertuneError
    plugin = BackendPlugin(ONE)
    plugin.backend, plugin.worker_name = OneKind(), "gpu0"
    every = OneKind().space(P).configs()
    assert plugin.configs_at(P, (len(every), [3, 1], [(3, every[3].key)])) == [every[3], every[1]]
    with pytest.raises(ShadertuneError, match="enumerates differently on worker gpu0"):
        plugin.configs_at(P, (len(every), [3], [(3, every[4].key)]))
    with pytest.raises(ShadertuneError, match="enumerates differently"):
        plugin.configs_at(P, (len(every) + 1, [3], [(3, every[3].key)]))


def test_a_batch_compiles_beside_the_gpus_chunk_by_chunk_while_they_time(client, control):
    live_workers(client, 2)
    for name in ("precompiled", "chunks", "builds"):
        (control / name).unlink(missing_ok=True)
    (group,) = coordinator(client).groups.values()
    base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
    batch = [Config(base, np=n) for n in range(8, 60, 2)]          # 26 configs
    (control / "compile-sleep").write_text("0.3")
    (control / "build-sleep").write_text("0.05")
    try:
        got = ClusterEvaluator(group, P, repeats=2).many(batch)
    finally:
        (control / "compile-sleep").unlink()
        (control / "build-sleep").unlink()
    assert [r.status for r in got] == ["ok"] * len(batch)
    # compiled once each, in chunks that tile the batch in its order: first one per GPU
    # of the host, then the host's cores shared among its workers, each on a worker's
    # compile thread, never its GPU thread
    keys = [c.key for c in batch]
    assert sorted((control / "precompiled").read_text().split()) == sorted(keys)
    chunks = [json.loads(line) for line in (control / "chunks").read_text().splitlines()]
    chunks.sort(key=lambda ch: keys.index(ch["first"]))
    assert [keys.index(ch["first"]) for ch in chunks] == \
        [sum(ch["n"] for ch in chunks[:i]) for i in range(len(chunks))]
    from shadertune.cluster.compiles import MIN_CHUNK
    cores = max(st.cpus for st in group.coordinator.statuses.values())
    assert chunks[0]["n"] == 2 and len(chunks) > 2
    assert all(ch["n"] <= max(MIN_CHUNK, cores // 2) for ch in chunks[1:])
    assert not any(ch["thread"].startswith("shadertune-gpu") for ch in chunks)
    # side by side on the two workers: a chunk's first compile does not hold back the next
    assert chunks[1]["pid"] != chunks[0]["pid"] and chunks[1]["start"] < chunks[0]["end"]
    builds = [line.split() for line in (control / "builds").read_text().splitlines()]
    assert all(thread.startswith("shadertune-gpu") for _, thread in builds)
    # the GPUs started on the first chunk while the later ones compiled
    first_build = min(float(t) for t, _ in builds)
    assert chunks[0]["end"] <= first_build < chunks[-1]["end"]


def test_prefetch_compiles_on_the_hosts_without_waiting(client, control):
    (control / "precompiled").unlink(missing_ok=True)
    (group,) = coordinator(client).groups.values()
    base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
    ahead = [Config(base, np=n) for n in (10, 12, 14)]
    ClusterEvaluator(group, P, repeats=2).prefetch(ahead)   # returns at once
    deadline = time.monotonic() + 30
    while not (control / "precompiled").exists() or \
            len((control / "precompiled").read_text().split()) < 3:
        assert time.monotonic() < deadline, "nothing was compiled ahead"
        time.sleep(0.05)
    assert (control / "precompiled").read_text().split() == [c.key for c in ahead]   # one host


def test_the_workers_share_a_table_evenly_while_it_compiles(client, control, tmp_path):
    # a compile that held a worker (the precompile call on its GPU thread) split a
    # CUDA table 19 / 5 between two GPUs; compiling beside them, they share it
    live_workers(client, 2)
    per_worker: dict = {}
    lock = threading.Lock()

    def count(r, cached, worker):
        with lock:
            per_worker[worker] = per_worker.get(worker, 0) + 1
    # (evaluations of 0.15 s, mostly waiting like a GPU's: CPU contention on a loaded
    # machine would otherwise make one worker process faster than the other; compile
    # chunks of seconds on the workers' host threads, which Dask's placement counted
    # into a worker's occupancy: a CUDA table split 123 / 5 on two H100s)
    (control / "compile-sleep").write_text("2.0")
    (control / "build-sleep").write_text("0.15")
    try:
        table = tune_table(coordinator(client, MODEL), [P, P2], budget=Budget(20), repeats=2,
                           store_path=tmp_path / "t.sqlite", on_search=lambda g, p: count)
    finally:
        (control / "compile-sleep").unlink()
        (control / "build-sleep").unlink()
    assert [e["evaluated"] for e in table[0][1]] == [20, 20]
    a, b = sorted(per_worker.values())
    assert set(per_worker) == {"gpu0", "gpu1"} and a + b == 40
    assert b - a <= 0.15 * b, per_worker


def test_a_strategy_loop_of_batches_finds_the_optimum(client):
    coord = coordinator(client)
    (group,) = coord.groups.values()
    sub = narrow(FakeBackend().space(P), {"glsl": ("450",), "fetch": ("texelFetch",),
                                          "unroll": (4,), "np": (16, 18, 20, 22, 24, 26),
                                          "mrt_h": (2, 4)})
    ev = ClusterEvaluator(group, P, repeats=2)
    configs = sub.configs()
    results = []
    for i in range(0, len(configs), 8):               # a strategy that asks for 8 at a time
        results += ev.many(configs[i:i + 8])
    best = min((r for r in results if r.ok), key=lambda r: r.median_ms)
    assert best.config == best_correct(sub) and len(results) == len(configs) == ev.measured
    assert abs(best.median_ms - cost_ms(best.config)) < 0.01 * cost_ms(best.config)


def test_stored_verdicts_are_judged_again_under_the_tolerance_on_the_cluster(client, tmp_path):
    from shadertune.core.result import Result
    coord = coordinator(client)
    (group,) = coord.groups.values()
    base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
    loose, tight = Config(base, np=20), Config(base, np=24)
    with Store(tmp_path / "t.sqlite") as store:
        # ok under a looser tolerance; wrong on its error alone under a tighter one
        store.put(Result("fake", KEY, P, loose, "ok", times_ms=[1.0], error=2e-6), "fake-templates-1")
        store.put(Result("fake", KEY, P, tight, "wrong", error=2e-6,
                         message="relative error 2e-06 > tolerance 1e-06"), "fake-templates-1")
        strict = ClusterEvaluator(group, P, store=store, tolerance=1e-6, repeats=2)
        (r,) = strict.many([loose])
        assert r.status == "wrong" and strict.measured == 0 and strict.cached == 1
        lenient = ClusterEvaluator(group, P, store=store, repeats=2)     # 1e-5
        got = lenient.many([loose, tight])
        assert [x.status for x in got] == ["ok", "ok"]
        assert lenient.cached == 1 and lenient.measured == 1             # measured again
        assert got[1].error < 1e-6 and got[1].times_ms != []


def test_the_model_strategy_on_the_cluster_follows_the_local_one(client, tmp_path):
    from cluster_fakes import ModelKind
    coord = coordinator(client, MODEL)
    (entries,) = [e for _, e in tune_table(coord, [P], budget=Budget(20), repeats=2,
                                           store_path=tmp_path / "t.sqlite")]
    local = tune(ModelKind(), P, budget=Budget(20), repeats=2)     # its default: model
    got = [r["config"] for r in entries[0]["results"]]
    assert got == [r["config"] for r in local["results"]]
    assert got[:3] == [dict(c) for c in ModelKind().candidates(P)]  # the seeds, timed first
    assert entries[0]["best"]["config"] == local["best"]["config"]


def test_each_device_gets_the_budget_made_for_it(client, tmp_path):
    coord = coordinator(client, TWO)
    table = tune_table(coord, [P], repeats=2, store_path=tmp_path / "t.sqlite",
                       budget=lambda device: Budget(4 if device.renderer.endswith("0") else 6))
    assert [(g.device.renderer, e["evaluated"]) for g, (e,) in table] == \
        [("fake gpu kind 0", 4), ("fake gpu kind 1", 6)]


class TwoAtOnce(Evaluator):
    """A local evaluator that says it runs two evaluations at once (it runs them one
    after another) and carries the configs timed ahead past their batch (measured at
    once, handed over at the next look): a search through it asks for what a search on
    two workers does, and measures the same configs."""
    parallelism = 2
    carries = True

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._landed = []

    def many(self, configs, stop=None, ahead=()):
        out = super().many(configs, stop)
        if len(out) == len(configs):
            known = set(configs) | {c for c, _ in self._landed}
            self._landed += [(c, self(c)) for c in ahead if c not in known]
        return out

    def collect(self):
        got, self._landed = self._landed, []
        return got

    def finish(self, wait=True):
        return [r for _, r in self.collect()]


def _configs(entry) -> list:
    return sorted(_key(r) for r in entry["results"])


def test_the_phased_search_on_the_cluster_follows_the_local_one(client, tmp_path):
    """One search alone on the group's two workers times configs ahead (in its steps'
    idle rounds, and one a worker across each step's end, carried on past the step):
    its own evaluations are the one-worker search's, and the budget's 30 evaluations
    are all measured and reported, those timed ahead and never asked for included."""
    coord = coordinator(client)
    (entries,) = [e for _, e in tune_table(coord, [P], budget=Budget(30), repeats=3,
                                           store_path=tmp_path / "t.sqlite")]
    got = entries[0]
    assert got["evaluated"] == got["measured"] == 30 and got["ahead"]["timed"] > 0
    be = FakeBackend()
    two = tune(be, P, budget=Budget(30), evaluator=TwoAtOnce(be, P, repeats=3))
    assert _configs(got) == _configs(two) and got["best"]["config"] == two["best"]["config"]
    # its own evaluations (all but those timed ahead and never asked for) are the
    # first of one worker's, in fewer rounds
    one = tune(FakeBackend(), P, budget=Budget(30), repeats=3)
    unasked = got["ahead"]["timed"] - got["ahead"]["asked"]
    both = {_key(r) for r in one["results"]} & {_key(r) for r in got["results"]}
    assert len(both) >= 30 - unasked
    assert set(got["stage_seconds"]) >= {"build", "store"}


def _key(result: dict) -> str:
    return json.dumps(result["config"], sort_keys=True)


def test_identical_gpus_are_one_device_with_the_evaluations_split(client, tmp_path):
    coord = coordinator(client)
    per_worker = {}
    lock = threading.Lock()

    def count(r, cached, worker):
        with lock:
            per_worker[worker] = per_worker.get(worker, 0) + 1
    table = tune_table(coord, [P, P2], budget=Budget(12), repeats=2,
                       store_path=tmp_path / "t.sqlite", on_search=lambda group, problem: count)
    assert len(table) == 1 and [e["evaluated"] for e in table[0][1]] == [12, 12]
    assert len(rows(tmp_path / "t.sqlite")) == 12 == len(rows(tmp_path / "t.sqlite", problem=P2))
    assert set(per_worker) == {"gpu0", "gpu1"} and sum(per_worker.values()) == 24


def test_different_gpus_tune_the_table_each_for_its_own_device(client, tmp_path):
    coord = coordinator(client, TWO)
    workers = {}
    table = tune_table(coord, [P, P2], budget=Budget(10), repeats=2, store_path=tmp_path / "t.sqlite",
                       on_search=lambda group, problem: lambda r, cached, worker:
                       workers.setdefault(r.device, set()).add(worker))
    keys = [g.device.key for g, _ in table]
    assert keys == ["fake gpu kind 0 | 1.0", "fake gpu kind 1 | 1.0"]
    assert workers == {keys[0]: {"gpu0"}, keys[1]: {"gpu1"}}
    for key in keys:
        for pr in (P, P2):
            got = rows(tmp_path / "t.sqlite", key, pr)
            assert len(got) == 10 and {r.device for r in got} == {key}


def test_a_worker_whose_gpu_has_no_context_is_reported_and_gets_no_work(client, tmp_path):
    events, workers = [], set()
    coord = coordinator(client, ODD, events)
    assert events == ["worker gpu1 (GPU 1) excluded: no EGL device 1"]
    (g, entries), = tune_table(coord, [P], budget=Budget(8), repeats=2,
                               on_search=lambda group, problem: lambda r, c, worker:
                               workers.add(worker))
    assert entries[0]["evaluated"] == 8 and workers == {"gpu0"}


def test_a_backend_no_worker_serves_is_one_clear_error(client):
    from shadertune.errors import ContextError
    with pytest.raises(ContextError, match="no worker of the cluster serves backend 'fake_backend:"
                                           "FakeBackend' .*--backends fake_backend:FakeBackend"):
        coordinator(client, "fake_backend:FakeBackend")


def test_a_worker_killed_mid_evaluation_costs_only_that_evaluation(client, control, tmp_path):
    live_workers(client, 2)
    events = []
    coord = coordinator(client, events=events)
    (control / "hang").write_text("")
    out = {}
    t = threading.Thread(target=lambda: out.update(table=tune_table(
        coord, [P], budget=Budget(30), repeats=2, store_path=tmp_path / "t.sqlite")))
    t.start()
    deadline = time.monotonic() + 60
    while not list(control.glob("hung-*")):
        assert t.is_alive() and time.monotonic() < deadline, "no evaluation hung"
        time.sleep(0.05)
    hung = next(control.glob("hung-*"))
    while not hung.read_text():                      # its key is written after the rename
        assert time.monotonic() < deadline
        time.sleep(0.02)
    key = hung.read_text()
    os.kill(int(hung.name.split("-")[1]), signal.SIGKILL)
    t.join(120)
    assert not t.is_alive()
    hung.unlink()
    (_, (entry,)), = out["table"]
    stored = rows(tmp_path / "t.sqlite")
    assert entry["evaluated"] == 30 and len(stored) == 30
    assert sorted(r.config.key for r in stored) == sorted(Config(r["config"]).key
                                                         for r in entry["results"])  # none lost
    (again,) = [r for r in stored if r.config.key == key]   # evaluated again elsewhere
    assert again.status in ("ok", "wrong", "invalid", "compile_failed")
    be = FakeBackend()                               # one search on two workers, uninterrupted
    local = tune(be, P, budget=Budget(30), evaluator=TwoAtOnce(be, P, repeats=2))
    assert entry["best"]["config"] == local["best"]["config"] and _configs(entry) == _configs(local)
    live_workers(client, 2)                          # its nanny restarted it
    # which worker went, and why (its nanny's word, which may come after the search)
    pid = int(hung.name.split("-")[1])
    deadline = time.monotonic() + 10
    while not any(f"pid {pid} " in e for e in events) and time.monotonic() < deadline:
        time.sleep(0.1)
    (said,) = [e for e in events if f"pid {pid} " in e]
    assert said.startswith("worker gpu") and said.endswith(
        "died: its process was killed by signal 9 (SIGKILL); its evaluation runs again on "
        "another worker, and its nanny restarts it"), said


def _workers_on_scheduler(dask_scheduler=None):
    return list(dask_scheduler.workers)


def test_a_value_lost_with_its_pinned_worker_before_the_fetch_gives_the_fetch_up(client):
    # a task pinned to a worker (as every evaluation is) is finished, and its worker dies
    # before the value is fetched: Dask would compute it again only there, so a plain
    # result() waits for good; outcome() with give_up cancels it and says why
    from shadertune.cluster.futures import outcome
    live_workers(client, 2)
    addr = sorted(client.run_on_scheduler(_workers_on_scheduler))[0]
    pid = client.run(os.getpid, workers=[addr])[addr]
    f = client.submit(sum, [1, 2, 3], pure=False, workers=[addr], allow_other_workers=False)
    assert f.result() == 6                          # done; held on that worker
    g = client.submit(sum, [4, 5], pure=False, workers=[addr], allow_other_workers=False)
    deadline = time.monotonic() + 30
    while g.status != "finished":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    got = []
    t = threading.Thread(target=lambda: got.append(outcome(
        g, 0.1, lambda: addr not in client.run_on_scheduler(_workers_on_scheduler))), daemon=True)
    t.start()
    t.join(60)
    assert got == [("cancelled", "its value was lost with the worker that held it")]
    live_workers(client, 2)                          # its nanny restarted it


def test_a_config_that_kills_every_worker_it_runs_on_is_recorded_after_three_tries(
        client, control, tmp_path):
    live_workers(client, 2)
    coord = coordinator(client)
    (group,) = coord.groups.values()
    base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
    deadly = Config(base, np=20)
    (control / "crash").write_text(deadly.key)
    try:
        with Store(tmp_path / "t.sqlite") as store:
            ev = ClusterEvaluator(group, P, store=store, repeats=2)
            # beside it, evaluations queued behind it on its worker die with it: they are
            # sent again, and its deaths are counted against it alone
            beside = [Config(base, np=n) for n in (26, 28, 30)]
            dead, *others = ev.many([deadly, *beside])
            after = ev.many([base, Config(base, np=24)])  # the search goes on
    finally:
        (control / "crash").unlink()
    assert dead.status == "run_failed"
    assert dead.message == "its worker died 3 times while evaluating it (killed or crashed)"
    assert [r.status for r in others] == ["ok"] * 3
    assert [r.status for r in after] == ["ok", "ok"]
    assert {r.config: r.status for r in rows(tmp_path / "t.sqlite")} == \
        {deadly: "run_failed", base: "ok", Config(base, np=24): "ok", **{c: "ok" for c in beside}}
    live_workers(client, 2)


@pytest.mark.slow
def test_a_worker_whose_context_fails_mid_search_is_excluded_and_retired(client, control, tmp_path):
    live_workers(client, 2)
    extra = popen_python(None, "-m", "shadertune.cluster", "worker", client.scheduler.address,
                         "--gpus", "7,8", "--host", "127.0.0.1", "--name", "extra", "--backends", ONE,
                         env={"CLUSTER_FAKE_DIR": control}, stderr=subprocess.PIPE)
    try:
        live_workers(client, 4)
        events, workers = [], set()
        coord = coordinator(client, ONE, events)
        (group,) = coord.groups.values()
        assert sorted(group.live.values()) == ["extra-gpu7", "extra-gpu8", "gpu0", "gpu1"]
        base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
        # backend calls of the coordinator's, one meeting the lost context: that worker is
        # excluded and another one answers (calls of 0.2 s, 8 at a time: every worker gets one)
        (control / "lose-calls-8").write_text("")
        (control / "sleep").write_text("0.2")
        configs = [Config(base, np=n) for n in range(12, 28, 2)]
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda c: group.backend.source(P, c), configs))
        (control / "sleep").unlink()
        assert got == [OneKind().source(P, c) for c in configs]
        assert events == ["worker extra-gpu8 excluded: fake GPU 8 fell off the bus"]
        # an evaluation that meets it: the worker is excluded, the evaluation runs elsewhere
        (control / "lose-7").write_text("")
        ev = ClusterEvaluator(group, P, repeats=2,
                              on_result=lambda r, c, worker: workers.add(worker))
        batch = [Config(base, np=n) for n in (12, 14, 16, 18, 20, 22, 24, 26, 28)]
        got = ev.many(batch)                         # three at a time: one on each worker
        assert events[1:] == ["worker extra-gpu7 excluded: fake GPU 7 fell off the bus"]
        assert [r.status for r in got] == ["ok"] * 9 and workers == {"gpu0", "gpu1"}
        assert extra.wait(timeout=60) == 0           # both retired: its command ends
        coord.refresh(force=True)
        assert sorted(group.live.values()) == ["gpu0", "gpu1"]
    finally:
        for name in ("lose-7", "lose-calls-8", "sleep"):
            (control / name).unlink(missing_ok=True)
        if extra.poll() is None:
            extra.kill()


def test_the_search_cli_joins_a_cluster_and_shows_evaluations_per_worker(client, tmp_path, capsys):
    live_workers(client, 2)
    rep = tmp_path / "r.json"
    assert main(["--backend", ONE, "--sizes", "8x8x64,8x8x32", "--budget", "10", "--repeats", "2",
                 "--cluster", client.scheduler.address, "--db", str(tmp_path / "t.sqlite"),
                 "--report", str(rep)]) == 0
    out = capsys.readouterr().out
    assert "| 8x8x64 float32" in out and "| 8x8x32 float32" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("evaluations per worker: "))
    counts = dict(w.rsplit(" ", 1) for w in line.split(": ", 1)[1].split(";")[0].split(", "))
    assert set(counts) == {"gpu0", "gpu1"} and sum(map(int, counts.values())) == 20
    assert line.endswith("total 20 measured")
    doc = json.loads(rep.read_text())
    check_report(doc)
    assert doc["device"]["renderer"] == "fake renderer" and len(doc["problems"]) == 2
    # two kinds of GPU: a table and a report per device
    assert main(["--backend", TWO, "--size", "8", "--budget", "4", "--repeats", "2", "-q",
                 "--cluster", client.scheduler.address, "--db", str(tmp_path / "t2.sqlite"),
                 "--report", str(rep)]) == 0
    out = capsys.readouterr().out
    assert "device: fake gpu kind 0 | 1.0" in out and "device: fake gpu kind 1 | 1.0" in out
    renderers = [json.loads((tmp_path / f"r.{i}.json").read_text())["device"]["renderer"]
                 for i in (0, 1)]
    assert renderers == ["fake gpu kind 0", "fake gpu kind 1"]


def test_the_search_cli_starts_its_own_workers_on_the_gpus_given(tmp_path, capsys):
    assert main(["--backend", ONE, "--size", "8", "--budget", "6", "--repeats", "2",
                 "--gpus", "1,0", "--db", str(tmp_path / "t.sqlite")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("evaluations per worker: "))
    counts = dict(w.rsplit(" ", 1) for w in line.split(": ", 1)[1].split(";")[0].split(", "))
    assert set(counts) <= {"gpu0", "gpu1"} and sum(map(int, counts.values())) == 6
    assert line.endswith("total 6 measured")


def test_a_cluster_none_of_whose_workers_opens_the_backend_leaves_no_store(tmp_path, capsys):
    # every worker fails to open its GPU: one error, exit 1, and no store file made
    db = tmp_path / "t.sqlite"
    assert main(["--backend", ODD, "--size", "8", "--budget", "2", "--gpus", "1,3",
                 "--db", str(db)]) == 1
    assert "no worker could open backend" in capsys.readouterr().err
    assert not db.exists()


@pytest.mark.parametrize("args, text", [
    (["--workers", "0"], "argument --workers: must be at least 1, got 0"),
    (["--workers", "2", "--gpus", "0"], "--workers 2 but --gpus names 1 GPUs"),
    (["--gpus", "0,x"], "--gpus: GPU list must be comma-separated integers"),
    (["--workers", "1", "--cluster", "tcp://127.0.0.1:1"], "not both"),
])
def test_bad_cluster_arguments_fail_in_one_line(tmp_path, capsys, args, text):
    with pytest.raises(SystemExit) as e:
        main(["--backend", ONE, "--size", "8", "--db", str(tmp_path / "t.sqlite"), *args])
    err = capsys.readouterr().err
    assert e.value.code == 2 and text in err and err.count("\n") == 1


def test_without_dask_the_cluster_options_say_how_to_get_it_and_a_plain_search_needs_none(tmp_path):
    code = ("import sys; sys.modules['distributed'] = None\n"
            "from shadertune.cli.search import main\n"
            f"assert main(['--backend', 'fake_backend:FakeBackend', '--size', '8', '--budget', '3', "
            f"'-q', '--db', {str(tmp_path / 'a.sqlite')!r}]) == 0\n"
            "assert 'dask' not in sys.modules\n"
            f"sys.exit(main(['--backend', {ONE!r}, '--size', '8', '--workers', '2', "
            f"'--db', {str(tmp_path / 'b.sqlite')!r}]))\n")
    p = run_python(code)
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("shadertune.search: error: --workers and --cluster need Dask")
    assert "pip install 'shadertune[cluster]'" in p.stderr and p.stderr.count("\n") == 1


def test_a_killed_coordinator_resumes_from_the_store(client, control, tmp_path, capsys):
    live_workers(client, 2)
    db = tmp_path / "t.sqlite"
    args = ["--backend", ONE, "--m", "8", "--n", "8", "--k", "64", "--budget", "24", "--repeats",
            "2", "-q", "--db", str(db), "--cluster", client.scheduler.address]
    (control / "sleep").write_text("0.03")
    try:
        p = popen_python(None, "-m", "shadertune.search", *args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not db.exists() or len(rows(db)) < 6:
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        p.send_signal(signal.SIGKILL)
        p.wait()
    finally:
        (control / "sleep").unlink()
    kept = {r.config.key for r in rows(db)}
    assert 6 <= len(kept) < 24
    rep = tmp_path / "r.json"
    assert main(args + ["--report", str(rep)]) == 0
    (doc,) = json.loads(rep.read_text())["problems"]
    assert doc["cached"] == len(kept) and doc["measured"] == 24 - len(kept)
    assert len(rows(db)) == 24                       # nothing lost, nothing twice
    # what one search on two workers asks for uninterrupted (TwoAtOnce: configs timed ahead)
    be = FakeBackend()
    local = tune(be, P, budget=Budget(24), evaluator=TwoAtOnce(be, P, repeats=2))
    assert _configs(doc) == _configs(local)     # the same configs (the order: as they came in)


def test_ctrl_c_on_a_cluster_table_reports_its_problems_in_progress_as_incomplete(
        control, tmp_path):
    # a local cluster of the search's own (--workers 2), and Ctrl-C as a terminal sends
    # it: SIGINT to the whole process group, the workers included
    db, rep = tmp_path / "t.sqlite", tmp_path / "r.json"
    (control / "sleep").write_text("0.03")
    try:
        p = popen_python(None, "-m", "shadertune.search", "--backend", ONE, "--sizes",
                         "8x8x64,8x8x32", "--budget", "40", "--repeats", "2", "--db", db,
                         "--report", rep, "--workers", "2", env={"CLUSTER_FAKE_DIR": control},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 60
        while not db.exists() or len(rows(db)) < 4 or len(rows(db, problem=P2)) < 4:
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        (control / "sleep").unlink()
    assert p.returncode == 130, err
    # the progress's lines and the error: no worker's traceback
    lines = err.splitlines()
    start, stopped, error = lines[0], lines[-2], lines[-1]
    assert all(ln.startswith("shadertune.search: 2 problems on 2 workers: ") for ln in lines[:-1]), err
    assert start == "shadertune.search: 2 problems on 2 workers: searching (budget 80 evaluations)"
    assert stopped.startswith("shadertune.search: 2 problems on 2 workers: stopped: ")
    assert "per worker: gpu0 " in stopped and ", gpu1 " in stopped
    assert error == ("shadertune.search: error: interrupted; results measured so far are in "
                     "the store, rerun to resume")
    assert out.count("(incomplete)") == 2
    doc = json.loads(rep.read_text())
    check_report(doc)
    assert [e.get("incomplete") for e in doc["problems"]] == [True, True]
    for e, pr in zip(doc["problems"], (P, P2)):               # what the store holds, no more
        assert e["evaluated"] == len(rows(db, problem=pr)) < 40


def test_a_dead_workers_death_counts_against_the_evaluation_it_ran_not_the_one_queued():
    # two evaluations in flight on a worker that died: the first sent (the one it ran)
    # counts a death; the one queued behind it is sent again with none, both first in
    # line in the order they were sent
    from collections import deque
    from types import SimpleNamespace
    from shadertune.cluster.evaluator import ClusterEvaluator

    class Fut:
        def done(self):
            return False

        def cancel(self):
            pass
    released = []
    group = SimpleNamespace(coordinator=SimpleNamespace(connected=True, scheduler_id="s"),
                            alive=lambda addr: addr != "dead", release=released.append)
    me = SimpleNamespace(group=group)
    ran, queued, elsewhere = Config(np=1), Config(np=2), Config(np=3)
    running = {Fut(): (queued, 2.0, "dead", "s"), Fut(): (ran, 1.0, "dead", "s"),
               Fut(): (elsewhere, 0.5, "live", "s")}
    todo, deaths = deque([Config(np=4)]), {}
    ClusterEvaluator._send_again_from_the_dead(me, running, todo, {}, deaths)
    assert deaths == {ran: 1}
    assert list(todo) == [ran, queued, Config(np=4)] and released == ["dead", "dead"]
    assert [e[0] for e in running.values()] == [elsewhere]


def test_a_workers_idle_time_between_its_evaluations_is_counted_on_its_clock():
    # (start, end) on the worker's clock: the gap since its previous evaluation (of any
    # search of the group), never negative where two were in flight and overlapped
    from types import SimpleNamespace
    from shadertune.cluster.evaluator import ClusterEvaluator
    me = SimpleNamespace(group=SimpleNamespace(ended={}))
    idle = lambda addr, span: ClusterEvaluator._idle_before(me, addr, span)   # noqa: E731
    assert idle("a", (10.0, 10.5)) == 0.0               # its first: nothing before it
    assert idle("a", (10.52, 11.0)) == pytest.approx(0.02)
    assert idle("b", (10.0, 10.4)) == 0.0               # another worker's clock
    assert idle("a", (10.9, 11.3)) == 0.0               # fetched out of order: no gap
    assert idle("a", (11.4, 11.5)) == pytest.approx(0.1)
    assert idle("a", None) == 0.0 and me.group.ended == {"a": 11.5, "b": 10.4}


def test_a_host_predictor_that_fails_here_leaves_the_prediction_to_a_worker():
    from types import SimpleNamespace
    from shadertune.cluster import RemoteBackend
    asked = []

    def broken(problem, configs):
        raise ImportError("a module this host lacks")

    def call(method, *args, **kw):
        asked.append(method)
        return broken if method == "host_predictor" else [1.0] * len(args[1])
    group = SimpleNamespace(backend_name="fake", default_strategy="model", call=call)
    remote = RemoteBackend(group)
    configs = [Config(np=n) for n in (8, 16)]
    assert remote.predict_ms(P, configs) == [1.0, 1.0]
    assert remote.predict_ms(P, configs) == [1.0, 1.0]
    assert asked == ["host_predictor", "predict_ms", "predict_ms"]     # tried here once
