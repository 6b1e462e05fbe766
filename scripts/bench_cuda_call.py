#!/usr/bin/env python3
"""What one shadertune.matmul call costs the host on a CUDA GPU, step by step,
and the launch means measured against each other (issue 38 items 1-2):

    python scripts/bench-cuda-call --out DIR [--sizes 64,256] [--only steps,launch]

Every number is host microseconds per call with the GPU held busy (a spin
kernel queued first, hold.py: no call waits for the device), the median of 5
rounds of 300 calls.

steps    per size (n^3 float32) and operand kind (CuPy; PyTorch where installed; DLPack:
         objects that are neither, over the tensors, else over the CuPy arrays):
           lane          matmul(A, B, config="default"): the steady path of a key
                         launched as kernels (SHADERTUNE_CUDA_LAUNCH=kernels)
           lane_graphs   ... with SHADERTUNE_CUDA_LAUNCH=graphs (the keys learned again)
           lane_out      the default launch means (graphs unless the variable says), out= a
                         preallocated array
           lane_knobs    ... config= the default config as a dict of knobs
           lane_auto     ... config="auto", db= a store path holding the size's result
           regular       the same call on the regular path (the lane off): a key's first call
           alloc         the result's allocation as the lane makes it (cupy.ndarray;
                         Tensor.new_empty for tensors), alloc_empty: torch.empty(shape,
                         dtype=, device=) (the lane's before)
           launches      the key's launches alone (driver.SteadyLaunch, kernels)
           launches_graphs   ... through graphs (graphs.GraphLaunch), the same addresses each call
           lane_python   lane - alloc - launches: the front door, the key, its lookup and checks
           recheck       what 'auto' runs on its clock (every 0.1 s): the selection's stamps
           torch_matmul, cupy_matmul   the frameworks' own call on the same operands
         DLPack rows (no out=, no launches: the key's plan is the CuPy arrays'), and:
           export        the two producers' __dlpack__(stream=, max_version=) alone: the
                         protocol's handshake, paid every call whoever consumes
           view          dlpack_view.view of both (the export and the capsules' reading: what
                         the lane does per operand)
           from_dlpack   cupy.from_dlpack of both (the lane's import before dlpack_view)
launch   the launch means for three configs (the default of 64^3: pre-split pack + GEMM;
         K_G split + the reduce kernel; a pre-split pack + GEMM at 256^3, on sm_90), per call
         of the config's launches, each checked to give the RawKernel call's bits, in this
         order (the driver called from Python outright last):
           rawkernel     CuPy's RawKernel call (arguments converted per launch)
           kernellaunch  launch.KernelLaunch: per-thread parameter arrays, cupy.cuda.driver.launchKernel
           steady        driver.SteadyLaunch: parameter arrays of the key's own (the lane's kernels)
           steady_nonblocking   ... on a non-blocking stream (the others: CuPy's current one)
           steady_graphs SteadyLaunch through graphs, the same addresses each call (no update)
           graphs_update ... a different result every call (graphs.KEEP + 1 in turn: every call
                         updates an executable graph's nodes, then launches it)
           captured_graph  a CUDA graph of the call captured once (fixed addresses)
           ctypes        cuLaunchKernel of libcuda through ctypes, arguments prebuilt
           cuda_python   cuLaunchKernel of cuda-python (cuda.bindings.driver), where installed
         A means that fails says its error (the driver's name for it); one that leaves the
         context broken (a sticky error) ends the section there, said in the row.

Writes DIR/bench-cuda-call.json and .md after each section.
"""
import argparse
import ctypes
import os
import pathlib
import statistics
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))        # its sibling bench_cuda_arrays

import numpy as np  # noqa: E402

from bench_cuda_arrays import torch_mod  # noqa: E402  (scripts/: torch with TF32 off, or None)


def host_us(cp, fn, n: int = 300, rounds: int = 5, stream=None) -> float:
    """Median host microseconds per call of fn() with the GPU held busy (the hold
    and the syncs on `stream`, CuPy's current one by default)."""
    from shadertune.backends.cuda.hold import hold
    st = stream or cp.cuda.get_current_stream()
    fn()
    st.synchronize()
    per = []
    for _ in range(rounds):
        hold(n * 60.0, st)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n * 1e6)
        st.synchronize()
    return statistics.median(per)


def _means(value: str | None):
    """Set $SHADERTUNE_CUDA_LAUNCH (None: unset); the lane's keys are learned again."""
    import shadertune.front.matmul as front
    if value is None:
        os.environ.pop("SHADERTUNE_CUDA_LAUNCH", None)
    else:
        os.environ["SHADERTUNE_CUDA_LAUNCH"] = value
    front.door("cuda").express.forget()


def section_steps(cp, sizes, out_dir, log) -> list:
    import shadertune
    import shadertune.front.matmul as front
    from shadertune.db import Store
    from shadertune.core.problem import Problem
    from shadertune.search import Budget, tune
    be = front.backend("cuda")
    door = front.door("cuda")
    torch = torch_mod()
    rows = []
    store_path = out_dir / "steps.sqlite"
    with Store(store_path) as store:
        for n in sizes:
            tune(be, Problem(n, n, n), budget=Budget(max_evals=1), store=store)
    for n in sizes:
        rs = cp.random.RandomState(n)
        cA, cB = rs.uniform(-1, 1, (n, n)).astype("float32"), rs.uniform(-1, 1, (n, n)).astype("float32")
        kinds = [("cupy", cA, cB, cp.empty((n, n), "float32"))]
        if torch is not None:
            tA, tB = torch.from_dlpack(cA), torch.from_dlpack(cB)
            kinds.append(("torch", tA, tB, torch.empty((n, n), device="cuda")))
        dl = kinds[-1][1:3]
        kinds.append(("dlpack", DLPackArray(dl[0]), DLPackArray(dl[1]), None))
        knobs = be.default_config(Problem(n, n, n)).to_dict()
        for kind, A, B, O in kinds:
            r = {"size": n, "operands": kind}
            mm = shadertune.matmul
            lane = door.express
            if kind == "dlpack":
                r["producer"] = "torch" if torch is not None else "cupy"
                rows.append(_dlpack_steps(cp, r, A, B, lambda **k: mm(A, B, backend="cuda", **k), door,
                                          knobs, store_path, torch, cA, cB))
                log("steps     " + " ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                            for k, v in rows[-1].items()))
                continue

            def plan_of():
                plans = [q for key, q in lane._plans.items() if key[0] == "default" and key[1] is None
                         and len(key) == 12 and tuple(key[2]) == (n, n) and (q.torch_dtype is None) == (kind == "cupy")]
                return plans[0] if plans else None
            if kind == "cupy":
                st = cp.cuda.get_current_stream()
                pa, pb, po = A.data.ptr, B.data.ptr, O.data.ptr
                extra = ()
            else:
                from shadertune.backends.cuda.call import _external_stream, _torch_stream
                st = _external_stream(cp, _torch_stream(0), 0)
                pa, pb, po = A.data_ptr(), B.data_ptr(), O.data_ptr()
            for means, suffix in (("kernels", ""), ("graphs", "_graphs")):
                _means(means)
                r["lane" + suffix] = host_us(cp, lambda: mm(A, B, backend="cuda", config="default"))
                plan = plan_of()
                if plan is not None:
                    extra = () if kind == "cupy" else (plan.alloc,)
                    r["launches" + suffix] = host_us(cp, lambda: plan.go(pa, pb, po, 1.0, 0.0, st, *extra))
                    r["graph_made" + suffix] = getattr(plan.go, "graph", None) is not None    # still, after
            _means(None)
            r["lane_out"] = host_us(cp, lambda: mm(A, B, O, backend="cuda", config="default"))
            r["lane_knobs"] = host_us(cp, lambda: mm(A, B, backend="cuda", config=knobs))
            r["lane_auto"] = host_us(cp, lambda: mm(A, B, backend="cuda", config="auto", db=str(store_path)))

            def regular():
                door.express = None
                try:
                    return mm(A, B, backend="cuda", config="default")
                finally:
                    door.express = lane
            r["regular"] = host_us(cp, regular)
            if kind == "cupy":
                r["alloc"] = host_us(cp, lambda: cp.ndarray((n, n), np.float32))
                r["cupy_matmul"] = host_us(cp, lambda: cp.matmul(A, B))
                if torch is not None:
                    tA, tB = torch.from_dlpack(A), torch.from_dlpack(B)
                    r["torch_matmul"] = host_us(cp, lambda: torch.matmul(tA, tB))
            else:
                dev = torch.device("cuda", 0)
                r["alloc"] = host_us(cp, lambda: A.new_empty((n, n)))
                r["alloc_empty"] = host_us(cp, lambda: torch.empty((n, n), dtype=torch.float32, device=dev))
                r["torch_matmul"] = host_us(cp, lambda: torch.matmul(A, B))
            if "launches" in r:
                r["lane_python"] = r["lane"] - r["alloc"] - r["launches"]
            p = Problem(n, n, n)
            r["recheck"] = host_us(cp, lambda: door.auto_config(p, str(store_path)))
            r["config"] = knobs
            rows.append(r)
            log("steps     " + " ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                        for k, v in r.items() if k != "config"))
    return rows


class DLPackArray:
    """A CUDA DLPack object that is neither a CuPy array nor a tensor (a JAX array's
    interface) over one of them: what 'dlpack' operands are (bench-shape-classes' too)."""

    def __init__(self, x):
        self._x, self.shape = x, tuple(x.shape)
        self.dtype = str(x.dtype).removeprefix("torch.")

    def __dlpack__(self, stream=None, **kw):
        return self._x.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return self._x.__dlpack_device__()


def _dlpack_steps(cp, r, A, B, call, door, knobs, store_path, torch, cA, cB) -> dict:
    """A DLPack row of section_steps: the lane under both means, the regular path,
    the producers' export, the lane's reading and CuPy's import, the frameworks'
    matmul on the memory the objects export."""
    from shadertune.backends.cuda.dlpack_view import MAX_VERSION, consumer_stream, view
    for means, suffix in (("kernels", ""), ("graphs", "_graphs")):
        _means(means)
        r["lane" + suffix] = host_us(cp, lambda: call(config="default"))
    _means(None)
    r["lane_knobs"] = host_us(cp, lambda: call(config=knobs))
    r["lane_auto"] = host_us(cp, lambda: call(config="auto", db=str(store_path)))
    lane = door.express

    def regular():
        door.express = None
        try:
            return call(config="default")
        finally:
            door.express = lane
    r["regular"] = host_us(cp, regular)
    s = consumer_stream(cp)
    r["export"] = host_us(cp, lambda: (A.__dlpack__(stream=s, max_version=MAX_VERSION),
                                       B.__dlpack__(stream=s, max_version=MAX_VERSION)))
    r["view"] = host_us(cp, lambda: (view(A, s), view(B, s)))
    r["from_dlpack"] = host_us(cp, lambda: (cp.from_dlpack(A), cp.from_dlpack(B)))
    n = A.shape[0]
    r["alloc"] = host_us(cp, lambda: cp.ndarray((n, n), np.float32))
    r["cupy_matmul"] = host_us(cp, lambda: cp.matmul(cA, cB))
    if torch is not None:
        tA, tB = torch.from_dlpack(cA), torch.from_dlpack(cB)
        r["torch_matmul"] = host_us(cp, lambda: torch.matmul(tA, tB))
    return r


def libcuda():
    """libcuda through ctypes (the tests give a stand-in)."""
    return ctypes.CDLL("libcuda.so.1")


def cuda_python_driver():
    """cuda-python's driver module (cuda.bindings.driver, or the older cuda.cuda)."""
    try:
        from cuda.bindings import driver
    except ImportError:
        from cuda import cuda as driver
    return driver


def _error_name(lib, rc: int) -> str:
    name = ctypes.c_char_p()
    try:
        if not lib.cuGetErrorName(rc, ctypes.byref(name)) and name.value:
            return f"{name.value.decode()} ({rc})"
    except Exception:      # noqa: BLE001 (a stand-in without it)
        pass
    return f"CUresult {rc}"


class Means:
    """One launch means: calling it enqueues `per` calls' launches on `stream`;
    `owns` holds what those launches read from host memory (parameter arrays,
    graphs) for as long as it may be called. (The first GPU run of this script
    kept only the arrays' addresses for the ctypes and cuda-python means: the
    BoundLaunches that owned them were freed when the function that made them
    returned, and the driver read freed host memory as the kernels' parameters:
    INVALID_VALUE where a slot read NULL, and a pack kernel launched on garbage
    addresses, the illegal address that ended the run.)"""

    def __init__(self, fn, stream, owns=(), per: int = 1):
        self.fn, self.stream, self.owns, self.per = fn, stream, owns, per

    def __call__(self):
        return self.fn()


def _launches(k, a, b, c):
    """(KernelLaunch, grid, addresses, constants) of one call of kernel k on (a, b, c)."""
    st = k._cp.cuda.get_current_stream()
    s = k._scales_of(1.0, 0.0)
    if k._pack is not None:
        pa = k._workspace(st, sum(k._packed))[0]
        pb = pa + 4 * k._packed[0]
        return [(k._launch_pack, k._pack_grid, (a, b, pa, pb), k._dims[:3]),
                (k._launch_main, k._grid1, (pa, pb, c, c, 0), s[1])]
    if k._kg > 1:
        w = k._workspace(st, k._w1)[0]
        out = [(k._launch_main, k._grid_kg, (a, b, c, w, k._counters(st)), s[1])]
        if k._reduce is not None:
            out.append((k._launch_reduce, k._rgrid1, (w, c), s[3]))
        return out
    return [(k._launch_main, k._grid1, (a, b, c, c, 0), s[1])]


def _alternatives(cp, k, a, b, c) -> dict:
    """name -> Means (or the exception that kept it from being made), each
    enqueueing the call's launches of kernel k on (a, b) into c its own way."""
    from shadertune.backends.cuda import graphs
    from shadertune.backends.cuda.launch import BoundLaunch, bind_context
    st = cp.cuda.get_current_stream()
    alts = {}
    launches = _launches(k, a, b, c)
    raw = [(kl, g, ad + tuple(t(x) for t, x in zip(kl._numpy, co))) for kl, g, ad, co in launches]
    alts["rawkernel"] = Means(lambda: [kl.function(g, kl.block, args, shared_mem=kl.shared_mem, stream=st)
                                       for kl, g, args in raw], st, (raw,))
    alts["kernellaunch"] = Means(lambda: [kl.launch(g, st, ad, co) for kl, g, ad, co in launches], st, (launches,))
    go = k.launcher(0, 0, 1)
    alts["steady"] = Means(lambda: go(a, b, c, 1.0, 0.0, st), st, (go,))
    nb = cp.cuda.Stream(non_blocking=True)
    go_nb = k.launcher(0, 0, 1)
    alts["steady_nonblocking"] = Means(lambda: go_nb(a, b, c, 1.0, 0.0, nb), nb, (go_nb, nb))
    gg = k.launcher(0, 0, 1, graphs=True)
    if gg.graph is None:
        alts["steady_graphs"] = alts["graphs_update"] = RuntimeError(
            f"no graph was made (graphs.driver(): {graphs.driver()!r})")
    else:
        alts["steady_graphs"] = Means(lambda: gg(a, b, c, 1.0, 0.0, st), st, (gg,))
        gu = k.launcher(0, 0, 1, graphs=True)
        spare = [cp.empty(k.problem.out_shape, k.problem.dtype) for _ in range(graphs.KEEP)]
        results = [x.data.ptr for x in spare] + [c]       # KEEP + 1 in turn; c last: its bits are checked

        def update():
            for x in results:
                gu(a, b, x, 1.0, 0.0, st)
        alts["graphs_update"] = Means(update, st, (gu, spare), per=len(results))
    try:     # a graph of the call captured once on a stream of its own (fixed addresses)
        gs = cp.cuda.Stream(non_blocking=True)
        with gs:
            gs.begin_capture()
            go(a, b, c, 1.0, 0.0, gs)
            graph = gs.end_capture()
        alts["captured_graph"] = Means(lambda: graph.launch(st), st, (graph, gs))
    except Exception as e:     # noqa: BLE001
        alts["captured_graph"] = e
    # the driver called from Python outright: BoundLaunches own the parameter arrays
    # (a Means holds them: see its docstring)
    bound = [BoundLaunch(kl, g, co) for kl, g, ad, co in launches]
    for bl, (kl, g, ad, co) in zip(bound, launches):
        bl.p.addrs[:] = ad
    try:
        lib = libcuda()
        f = lib.cuLaunchKernel
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        calls = [(ctypes.c_void_p(bl.head[0]),) + bl.head[1:] + (ctypes.c_void_p(st.ptr),
                                                                 ctypes.c_void_p(bl.p.address), None)
                 for bl in bound]

        def via_ctypes():
            for args in calls:
                rc = f(*args)
                if rc:
                    raise RuntimeError(f"cuLaunchKernel: {_error_name(lib, rc)}")
        alts["ctypes"] = Means(via_ctypes, st, (bound,))
    except (OSError, AttributeError) as e:
        alts["ctypes"] = e
    try:
        cud = cuda_python_driver()
        pre = [(cud.CUfunction(bl.head[0]),) + bl.head[1:] + (cud.CUstream(st.ptr), bl.p.address, 0) for bl in bound]

        def via_cuda_python():
            for args in pre:
                err = cud.cuLaunchKernel(*args)[0]
                if int(err):
                    raise RuntimeError(f"cuLaunchKernel: {err!r}")
        alts["cuda_python"] = Means(via_cuda_python, st, (bound,))
    except Exception as e:     # noqa: BLE001 (not installed, or another API: reported)
        alts["cuda_python"] = e
    bind_context(cp)
    return alts


NAMES = ["rawkernel", "kernellaunch", "steady", "steady_nonblocking", "steady_graphs", "graphs_update",
         "captured_graph", "ctypes", "cuda_python"]


def _context_error(cp) -> str | None:
    """A sticky error of the context (every later call would report it), or None."""
    try:
        cp.cuda.runtime.deviceSynchronize()
        return None
    except Exception as e:     # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def section_launch(cp, log, be=None, calls: int = 300, rounds: int = 5) -> list:
    import shadertune.front.matmul as front
    from shadertune.core.problem import Problem
    be = be or front.backend("cuda")
    cases = [("the default of 64^3", Problem(64, 64, 64), None)]
    split = Problem(45, 37, 3001, "float32", False, True)
    cases.append(("K_G split + reduce kernel", split,
                  next(c for c in be.candidates(split, 48) if c["KG"] > 1 and not c["KR"])))
    if be.arch() == "sm_90":
        from shadertune.core.config import Config
        cases.append(("pre-split pack + GEMM", Problem(256, 256, 256),
                      Config(AR=0, BK=32, BM=64, BN=64, DB=1, KG=1, KL=1, KR=0, MMA=4, PAD=4, ST=3, TM=4, TN=4,
                             VEC=1, WM=64, WN=64, trans=1, PS=1)))
    rows = []
    for what, p, cfg in cases:
        cfg = cfg or be.default_config(p)
        k = be.build(p, cfg)
        rng = np.random.default_rng(3)
        A = cp.asarray(rng.uniform(-1, 1, p.stored_shapes[0]).astype("float32"))
        B = cp.asarray(rng.uniform(-1, 1, p.stored_shapes[1]).astype("float32"))
        C = cp.full(p.out_shape, np.nan, "float32")
        ref = k.run(cp.asnumpy(A), cp.asnumpy(B))
        row = {"what": what, "problem": p.key, "config": cfg.to_dict(), "us_per_call": {}, "equal": {}}
        rows.append(row)
        alts = _alternatives(cp, k, A.data.ptr, B.data.ptr, C.data.ptr)
        row["graphs_kept"] = {}
        broken = None
        for name in NAMES:
            m = alts[name]
            if isinstance(m, Exception):
                row["us_per_call"][name] = None
                row["equal"][name] = f"not run: {type(m).__name__}: {m}"[:200]
                continue
            try:
                C.fill(np.nan)
                cp.cuda.get_current_stream().synchronize()      # (a means on another stream: filled first)
                m()
                m.stream.synchronize()
                row["equal"][name] = bool(np.array_equal(cp.asnumpy(C), ref))
                row["us_per_call"][name] = host_us(cp, m, calls, rounds, stream=m.stream) / m.per
            except Exception as e:   # noqa: BLE001 (a means failing is its result)
                row["us_per_call"][name] = None
                row["equal"][name] = f"failed: {type(e).__name__}: {e}"[:200]
            if name in ("steady_graphs", "graphs_update"):    # still graphs, or given back to kernels?
                row["graphs_kept"][name] = m.owns[0].graph is not None
            broken = _context_error(cp)
            if broken:
                row["broken_after"] = f"{name}: {broken}"
                break
        log(f"launch    {what} ({p.key}): " + ", ".join(
            f"{n} {v:.2f}" + ("" if row["equal"][n] is True else f" [{row['equal'][n]}]") if v is not None
            else f"{n} - [{row['equal'][n]}]" for n, v in row["us_per_call"].items())
            + (f"  CONTEXT BROKEN after {row['broken_after']}" if broken else ""))
        if broken:
            break
        del alts
    return rows


def markdown(doc: dict) -> str:
    lines = [f"Device: {doc['device']}; {doc['date']}", "", f"Command: `{doc['command']}`", ""]
    if doc.get("steps"):
        keys = ["lane", "lane_graphs", "lane_out", "lane_knobs", "lane_auto", "regular", "alloc", "alloc_empty",
                "launches", "launches_graphs", "lane_python", "recheck", "torch_matmul", "cupy_matmul",
                "export", "view", "from_dlpack"]
        lines += ["Host us per call, the GPU held busy (median of 5 x 300 calls).", "",
                  "| size | operands | " + " | ".join(keys) + " |", "|---|---|" + "---:|" * len(keys)]
        for r in doc["steps"]:
            who = r["operands"] + (f" ({r['producer']})" if "producer" in r else "")
            lines.append(f"| {r['size']}^3 | {who} | " + " | ".join(
                "-" if r.get(k) is None else f"{r[k]:.2f}" for k in keys) + " |")
    if doc.get("launch"):
        names = NAMES
        lines += ["", "Launch means: host us per call of the config's launches (GPU held); `!` gave other bits.", "",
                  "| call | problem | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
        notes = []
        for r in doc["launch"]:
            cells = []
            for n in names:
                v, eq = r["us_per_call"].get(n), r["equal"].get(n)
                cells.append("-" if v is None else f"{v:.2f}" + ("" if eq is True else " !"))
                if eq is not True and eq is not None:
                    notes.append(f"- {r['what']}, {n}: {eq}")
                if r.get("graphs_kept", {}).get(n) is False:
                    notes.append(f"- {r['what']}, {n}: the graphs were given up (these are kernels' numbers)")
            lines.append(f"| {r['what']} | {r['problem']} | " + " | ".join(cells) + " |")
            if r.get("broken_after"):
                notes.append(f"- {r['what']}: the context was broken after {r['broken_after']}")
        lines += ([""] + notes) if notes else []
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench-cuda-call", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="64,256", help="n of the n^3 float32 steps (default 64,256)")
    ap.add_argument("--only", default="steps,launch", help="sections (default steps,launch)")
    a = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in a.sizes.split(",")]
        if min(sizes) < 1:
            raise ValueError
    except ValueError:
        ap.error(f"--sizes: positive integers, got {a.sizes!r}")
    only = set(a.only.split(","))
    if only - {"steps", "launch"}:
        ap.error(f"--only: steps and/or launch, got {a.only!r}")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from shadertune.core.atomic import write_text
    from shadertune.backends.cuda.baseline import plain_fp32
    import json
    import shadertune.front.matmul as front
    cp = plain_fp32()
    info = front.backend("cuda").device().to_dict()
    doc = {"device": f"{info['renderer']} ({info['driver']})", "date": time.strftime("%Y-%m-%d %H:%M"),
           "command": "python scripts/bench-cuda-call " + " ".join(sys.argv[1:] if argv is None else argv)}
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)
    for name, fn in [("steps", lambda: section_steps(cp, sizes, out, log)), ("launch", lambda: section_launch(cp, log))]:
        if name in only:
            try:
                doc[name] = fn()
            except Exception:     # one section failing must not lose the other
                doc[f"{name}_failed"] = traceback.format_exc()
                log(f"{name}: FAILED\n{doc[f'{name}_failed']}")
            write_text(out / "bench-cuda-call.json", json.dumps(doc, indent=1, default=str))
            write_text(out / "bench-cuda-call.md", markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    from shadertune.errors import ContextError
    try:
        sys.exit(main())
    except ContextError as e:        # no CUDA device or no CuPy here: one line, no traceback
        sys.exit(f"bench-cuda-call: error: {e}")
