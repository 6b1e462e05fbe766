"""CompileAhead's bookkeeping (cluster/compiles.py) with stand-ins for the group and
Dask's futures: chunks side by side on a host's workers, the prefix under way, a chunk
whose workers left sent again, a host whose workers all left dropped."""
import pytest

pytest.importorskip("distributed")

from shadertune.cluster.compiles import MIN_CHUNK, CompileAhead             # noqa: E402


class Future:
    def __init__(self, configs, workers):
        self.configs, self.workers = configs, workers
        self.status, self.callbacks = "pending", []

    def done(self):
        return self.status != "pending"

    def finish(self):
        self.status = "finished"
        for cb in self.callbacks:
            cb(self)

    def result(self):
        return {"seconds": 0.5}

    def cancel(self):
        self.status = "cancelled"

    def add_done_callback(self, cb):
        self.callbacks.append(cb)


class Group:
    spec, host_resource = "fake", "host"

    def __init__(self, hosts, cpus=64, compile_scope="host"):
        self._hosts, self.cpus, self.sent = hosts, cpus, []
        self.compile_scope = compile_scope
        self.coordinator = self
        self.client = self

    # the coordinator's and the client's parts
    def refresh(self):
        pass

    def submit(self, fn, spec, problem, configs, workers, **kw):
        f = Future(configs, workers)
        self.sent.append(f)
        return f

    # the group's
    def hosts(self):
        return {h: list(a) for h, a in self._hosts.items() if a}

    def host_cpus(self, host):
        return self.cpus

    def gone(self, addrs):
        return not any(a in sum(self._hosts.values(), []) for a in addrs)


def test_chunks_go_side_by_side_one_a_worker_and_the_prefix_advances_in_order():
    group = Group({"h": ["a", "b", "c", "d"]})
    configs = list(range(100))
    plan = CompileAhead(group, None, configs, wake=lambda: None)
    share = max(MIN_CHUNK, 64 // 4)
    # one chunk a worker at once: the first one config per GPU, then the cores' share
    assert [f.configs for f in group.sent] == [configs[0:4], configs[4:4 + share],
                                              configs[4 + share:4 + 2 * share],
                                              configs[4 + 2 * share:4 + 3 * share]]
    assert plan.ready() == 0
    group.sent[1].finish()                      # a later chunk first: not a prefix yet
    assert plan.ready() == 0 and len(group.sent) == 5     # its worker got the next chunk
    group.sent[0].finish()
    assert plan.ready() == 4 + share
    for f in list(group.sent):
        f.finish()
    while plan.ready() < len(configs):
        for f in list(group.sent):
            if not f.done():
                f.finish()
    covered = sorted(c for f in group.sent for c in f.configs)
    assert covered == configs and plan.seconds == 0.5 * len(group.sent)


def test_a_chunk_whose_workers_left_is_sent_again_and_a_host_without_workers_drops_out():
    group = Group({"h": ["a", "b"], "g": ["x"]})
    configs = list(range(30))
    plan = CompileAhead(group, None, configs, wake=lambda: None)
    first_h = [f for f in group.sent if f.workers == ["a", "b"]]
    assert [f.configs for f in first_h] == [configs[0:2], configs[2:]]     # 64 cores / 2 GPUs
    group._hosts["h"] = ["a2", "b2"]            # both restarted under new addresses
    assert plan.ready() == 0
    assert all(f.status == "cancelled" for f in first_h)
    again = [f for f in group.sent if f.workers == ["a2", "b2"]]
    assert [f.configs for f in again] == [configs[0:2], configs[2:]]
    group._hosts["g"] = []                      # host g's only worker gone for good
    for f in again:
        f.finish()
    assert plan.ready() == len(configs)         # host h's prefix alone counts now
    assert "g" not in plan._hosts


def test_cancel_cancels_every_chunk_in_flight():
    group = Group({"h": ["a", "b"]})
    plan = CompileAhead(group, None, list(range(40)), wake=lambda: None)
    plan.cancel()
    assert group.sent and all(f.status == "cancelled" for f in group.sent)


def test_compiles_that_serve_their_process_go_whole_to_every_worker():
    """GL (compile_scope "process"): the group lists each worker on its own, and each gets
    the whole batch in one chunk, ready once every worker has it."""
    from types import SimpleNamespace
    from shadertune.cluster.coordinator import DeviceGroup
    statuses = {a: SimpleNamespace(compiles=True, host="h") for a in ("a", "b", "c")}
    fake = SimpleNamespace(live={"a": "w0", "b": "w1", "c": "w2"}, compile_scope="process",
                           coordinator=SimpleNamespace(statuses=statuses))
    assert DeviceGroup.hosts(fake) == {"a": ["a"], "b": ["b"], "c": ["c"]}
    fake.compile_scope = "host"
    assert DeviceGroup.hosts(fake) == {"h": ["a", "b", "c"]}
    group = Group({"a": ["a"], "b": ["b"]}, compile_scope="process")
    configs = list(range(30))
    plan = CompileAhead(group, None, configs, wake=lambda: None)
    assert [(f.workers, f.configs) for f in group.sent] == [(["a"], configs), (["b"], configs)]
    group.sent[0].finish()
    assert plan.ready() == 0                     # b has not got it yet
    group.sent[1].finish()
    assert plan.ready() == len(configs) and len(group.sent) == 2
