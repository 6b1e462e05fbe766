"""A GL search on a local Dask cluster of real GL workers (llvmpipe here: two workers
share EGL device 0, and a third asks for EGL device 9, which does not exist), with one
worker killed mid-search.  One cluster for the module."""
import os
import signal
import threading

import pytest

pytest.importorskip("distributed")

from shadertune.cluster import Coordinator, local_cluster, tune_table   # noqa: E402
from shadertune.config import Config                                    # noqa: E402
from shadertune.db import Store                                         # noqa: E402
from shadertune.problem import Problem                                  # noqa: E402
from shadertune.search import Budget                                    # noqa: E402

P = Problem(40, 36, 44)          # small, and no tile divides it


@pytest.fixture(scope="module")
def client():
    with local_cluster([0, 0, 9], ["gl"]) as c:
        yield c


def test_a_gl_search_survives_a_worker_killed_mid_search(client, gl_backend, tmp_path):
    events = []
    coord = Coordinator(client, "gl", on_event=events.append)
    # the worker on a GPU that is not there is reported and gets no work
    assert len(events) == 1 and events[0].startswith(
        "worker gpu9 (GPU 9) excluded: cannot create a headless EGL GL context (device_index=9)")
    (group,) = coord.groups.values()
    assert group.device.key == gl_backend.device().key
    pids = {name: pid for name, pid in
            ((client.scheduler_info()["workers"][a]["name"], pid)
             for a, pid in client.run(os.getpid).items())}
    by_worker, killed = {}, []
    lock = threading.Lock()

    def on_result(r, cached, worker):
        with lock:
            by_worker.setdefault(worker, []).append(r)
            if sum(map(len, by_worker.values())) == 4 and not killed:
                # kill the other worker: it is in the middle of its own evaluation
                victim = "gpu0-1" if worker == "gpu0-0" else "gpu0-0"
                os.kill(pids[victim], signal.SIGKILL)
                killed.append(victim)

    db = tmp_path / "t.sqlite"
    (g, (entry,)), = tune_table(coord, [P], budget=Budget(12), repeats=2, store_path=db,
                                on_search=lambda group, problem: on_result)
    assert killed and entry["evaluated"] == 12 == entry["measured"]
    assert entry["best"] is not None
    with Store(db) as s:
        stored = s.results("gl", group.device.key, P)
        # every row with the seconds its measurement took on its worker (schema 3)
        seconds, unknown = s.measured_seconds("gl", group.device.key, P, group.template_hash,
                                              [r.config for r in stored])
    assert unknown == 0 and seconds > 0
    # no result lost, none twice: the store holds exactly the search's configs, once each
    assert sorted(r.config.key for r in stored) == \
        sorted(Config(r["config"]).key for r in entry["results"])
    assert len({r.config.key for r in stored}) == 12
    assert {r.device for r in stored} == {gl_backend.device().key}
    assert sum(map(len, by_worker.values())) == 12 and None not in by_worker
