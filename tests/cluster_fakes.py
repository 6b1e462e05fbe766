"""Fake backends on a 'GPU' for the cluster tests (a cluster constructs a module:Class
backend as Class(device_index=gpu)).

Faults are armed per test through files in $CLUSTER_FAKE_DIR, which the workers
inherit from the test process:
- 'hang': the first build that finds it renames it to 'hung-<pid>', writes its
  config's key there and never returns (a stuck evaluation; the test then kills
  that worker process);
- 'lose-<gpu>': every build on that GPU raises ContextError (its context is gone);
- 'lose-calls-<gpu>': so does every source() there (a backend call of the coordinator's);
- 'sleep': every build and source() sleeps that many seconds (a slow search, to kill its
  coordinator; calls that keep every worker busy);
- 'crash': every build of the config whose key the file holds ends its process at once
  (a kernel that takes the driver down with it);
- 'compile-sleep': every precompile sleeps that many seconds (NVRTC's time);
- 'build-sleep': every build sleeps that many seconds (an evaluation's GPU time);
- 'build-spin': every build spins that many seconds in Python, holding the interpreter
  lock (an evaluation's host work: launches, timing, verification in Python).
Every precompile appends its configs' keys to 'precompiled' there, one a line, and a
JSON line to 'chunks' ({thread, pid, start, end, n, first}: when and where it ran, its
size and first config's key); every build
appends 'monotonic-time thread-name' to 'builds', every predict_ms 'N thread-name' to
'predicted'.
"""
from __future__ import annotations

import json
import os
import threading
import time

from fake_backend import FakeBackend, cost_ms

from shadertune.backends.base import DeviceInfo
from shadertune.core.config import Config
from shadertune.errors import ContextError


def _control(name: str) -> str:
    return os.path.join(os.environ.get("CLUSTER_FAKE_DIR", "/nonexistent"), name)


def _sleep(name: str = "sleep") -> None:
    try:
        with open(_control(name)) as f:
            time.sleep(float(f.read()))
    except OSError:
        pass


def _spin(name: str = "build-spin") -> None:
    try:
        with open(_control(name)) as f:
            end = time.perf_counter() + float(f.read())
    except OSError:
        return
    while time.perf_counter() < end:
        pass


def predicted(problem, configs):
    """A cost model: the fake's own cost surface, doubled (so that it is not the default
    None, nor the measured times).  Appends 'N thread-name pid' to 'predicted'."""
    if os.path.isdir(_control("")):
        with open(_control("predicted"), "a") as f:
            f.write(f"{len(configs)} {threading.current_thread().name} {os.getpid()}\n")
    return [2 * cost_ms(c) for c in configs]


class OneKind(FakeBackend):
    """Identical GPUs: every device_index has the same device key."""

    def __init__(self, device_index: int = 0):
        super().__init__()
        self.device_index = device_index

    def build(self, problem, config):
        if os.path.exists(_control(f"lose-{self.device_index}")):
            raise ContextError(f"fake GPU {self.device_index} fell off the bus")
        if os.path.isdir(_control("")):
            with open(_control("builds"), "a") as f:
                f.write(f"{time.monotonic()} {threading.current_thread().name}\n")
        _sleep()
        _sleep("build-sleep")
        _spin()
        try:
            with open(_control("crash")) as f:
                if f.read() == config.key:
                    os._exit(1)
        except OSError:
            pass
        hung = _control(f"hung-{os.getpid()}")
        try:
            os.rename(_control("hang"), hung)
        except OSError:
            pass                         # not armed, or another worker took it
        else:
            with open(hung, "w") as f:
                f.write(config.key)
            while True:
                time.sleep(1)
        return super().build(problem, config)

    def source(self, problem, config):
        if os.path.exists(_control(f"lose-calls-{self.device_index}")):
            raise ContextError(f"fake GPU {self.device_index} fell off the bus")
        _sleep()
        return super().source(problem, config)

    def precompile(self, problem, configs):
        start = time.monotonic()
        _sleep("compile-sleep")
        with open(_control("precompiled"), "a") as f:
            f.writelines(f"{c.key}\n" for c in configs)
        with open(_control("chunks"), "a") as f:
            f.write(json.dumps({"thread": threading.current_thread().name, "pid": os.getpid(),
                                "start": start, "end": time.monotonic(), "n": len(configs),
                                "first": configs[0].key if configs else None}) + "\n")

    def predict_ms(self, problem, configs):
        return predicted(problem, configs)

    def host_predictor(self):
        return predicted


class ModelKind(OneKind):
    """A backend whose default strategy is the model-guided one, with a candidate list
    of its own (what CUDA has)."""
    default_strategy = "model"

    def candidates(self, problem, n=24):
        base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
        return [Config(base, np=v) for v in (20, 24, 18)][:n]


class TwoKinds(OneKind):
    """Two kinds of GPU: even and odd device indices differ."""

    def device(self):
        return DeviceInfo("fake", "shadertune", f"fake gpu kind {self.device_index % 2}", "1.0",
                          {"max_draw_buffers": 8})


class OddHasNoContext(OneKind):
    """The odd GPUs cannot open a context."""

    def device(self):
        if self.device_index % 2:
            raise ContextError(f"no EGL device {self.device_index}")
        return super().device()
