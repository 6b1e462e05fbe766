#!/usr/bin/env python3
"""Shape classes against cuBLAS (issue 32 item 7, issue 38): for each shape, in one run,

    python scripts/bench-shape-classes --out benchmarks/RUN [--shapes LIST | --classes LIST]
                                       [--seconds 30] [--max-seconds 500] [--store PATH] [--seed N]
                                       [--host-sizes LIST | --no-host]

1. cuBLAS through PyTorch (torch.matmul, TF32 off; cupy.matmul where there is no
   PyTorch), on device arrays;
2. the untuned default: shadertune.matmul(A, B, backend="cuda", config="default")
   on the same device arrays;
3. a tune of --tune-seconds through the search core (shadertune.search.tune, the
   backend's default strategy) into the store (--store, default OUT/tune.sqlite),
   every config verified against float64 (bench-cuda's tolerance: 4x cuBLAS's
   own error for float32 where that is larger, at most 1e-4);
4. the tuned config (the store's best for the problem: what config="auto" takes)
   through shadertune.matmul on the same arrays, and the search's own median
   time of its best (for problems the backend times as calls, CUDABackend.call_timed,
   that median is of calls as the express lane makes them on CuPy arrays: events
   around each, a sync after each), beside tuned_call_same_ms: the tuned call on
   CuPy arrays over the same memory (the search's operand kind), timed the same way.
Three timings of every call (cuBLAS, untuned, tuned):
  *_ms        medians of CUDA events around one call each, the calls queued behind
              a spin kernel (hold.py): what the whole call (every kernel and copy it
              enqueues) costs the GPU;
  *_call_ms   as a user times one call: an event just before the call, one just
              after, a sync after each (host time up to the last launch included);
  *_loop_ms   a loop of calls with no hold, events around the loop, per call: what a
              program calling repeatedly sees when the host is slower than the device.
Errors: relative Frobenius against a float64 product of the same operands. Rows of
the class "large" are timed untuned only (no tune: they show the untuned default
stays >= 2x cuBLAS).

The host table (`host` in the JSON; --host-sizes, default 64, 256 and two mid
shapes; --no-host skips it): microseconds per call of shadertune.matmul against
torch.matmul (and cupy.matmul) on the same operands, for CuPy, PyTorch and DLPack
operands, the config named ('explicit'), given as knobs, or 'auto' over a store
path, a Store object and the default store ($SHADERTUNE_DB), without and with
out=, for each launch means of the express lane (--host-means, default
kernels,graphs: SHADERTUNE_CUDA_LAUNCH), in two modes: 'repeated' (many calls,
one sync: the least wall time per call of 3 rounds) and 'single' (events around
each call, a sync after each: the median). Ours and the two baselines of a row
are measured in turn, round by round, so a busy moment of the host falls on all.

Shapes (--shapes, comma-separated): MxNxK or BxMxNxK (B products), each with
:float64 for double; the default list covers the issue's classes (mid-size odd,
skinny, deep K, batches, float64; 4096^3 untuned second, 8192^3 last). Rows run in order until --max-seconds would
be passed (a row is estimated at its tune plus 25 s): the rest are listed as
skipped, so one GPU call of bounded length always writes its file.

Writes OUT/shape-classes.json ({"rows": [...], "host": [...], "device", "command"};
a row: shape, dtype, class, cublas_ms, untuned_ms, tuned_ms, search_ms, *_call_ms,
tuned_call_same_ms, *_loop_ms, *_error, tune_seconds, configs; a host row: operands,
db, size, out, mode, means, ours_us, torch_us, cupy_us; rewritten atomically after
every row)
and OUT/shape-classes.md.
"""
import argparse
import functools
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shadertune.core.problem import Problem  # noqa: E402
from shadertune.search.report_json import write_report  # noqa: E402

# (class, shape): issue 38's shapes and more of each class, in the order a bounded run
# takes them (--max-seconds): the issue's shapes of each class first, one large
# untuned row second (a short run still shows the untuned default of a large product)
DEFAULT_SHAPES = [
    ("mid-size odd", "900x700x1300"), ("large", "4096x4096x4096"), ("skinny", "48x6144x3072"),
    ("mid-size odd", "1200x1200x1200"),
    ("batched", "200x96x96x96"), ("batched", "512x64x64x64"), ("float64", "1500x1500x1500:float64"),
    ("float64", "1200x5000x800:float64"), ("deep K", "64x64x65536"), ("skinny", "4096x16x4096"),
    ("skinny", "64x8192x2048"), ("float64", "2500x2500x2500:float64"), ("batched", "32x384x384x384"),
    ("mid-size odd", "1531x1201x1777"), ("deep K", "256x192x32768"), ("float64", "1000x1000x1000:float64"),
    ("large", "8192x8192x8192"),
]
CLASSES = ("mid-size odd", "skinny", "deep K", "batched", "float64", "large")
ROW_OVERHEAD_S = 15.0    # a row's seconds besides its tune (compiles, references, space size, timing)
LOOP_MS = 50.0           # a loop of calls lasts about this long
CALL_REPEATS = 50        # single calls timed (events around each, a sync after each)
HOST_ROUNDS = 3          # the host table's rounds, ours and the baselines in turn (Gpu.host_compare)
HOST_SIZES = "64,256,900x700x1300,48x6144x3072"


@functools.lru_cache(maxsize=None)
def _load_script(name: str):
    """A script of scripts/ as a module (its helpers reused, not copied)."""
    import importlib.util
    module = name.replace("-", "_")
    spec = importlib.util.spec_from_file_location(module, ROOT / "scripts" / f"{module}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_shape(text: str) -> Problem:
    """'MxNxK' or 'BxMxNxK', optionally ':float64' (or ':float32')."""
    dims, _, dtype = text.strip().partition(":")
    dtype = dtype or "float32"
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r} in {text!r}")
    try:
        n = [int(x) for x in dims.lower().split("x")]
    except ValueError:
        raise ValueError(f"a shape is MxNxK or BxMxNxK of integers, got {text!r}") from None
    if len(n) not in (3, 4) or min(n) < 1:
        raise ValueError(f"a shape is MxNxK or BxMxNxK of positive integers, got {text!r}")
    b, (m, nn, k) = (n[0], n[1:]) if len(n) == 4 else (1, n)
    return Problem(m, nn, k, dtype, batch=b)


def classify(p: Problem) -> str:
    if p.batch == 1 and p.dtype == "float32" and min(p.M, p.N, p.K) >= 4096:
        return "large"
    if p.batch > 1:
        return "batched"
    if p.dtype == "float64":
        return "float64"
    if max(p.M, p.N) <= 256 and p.K >= 8 * max(p.M, p.N):
        return "deep K"
    if min(p.M, p.N) <= 64:
        return "skinny"
    if 500 <= min(p.M, p.N, p.K) and max(p.M, p.N, p.K) <= 2000:
        return "mid-size odd"
    return "other"


def shape_text(p: Problem) -> str:
    return (f"{p.batch}x" if p.batch > 1 else "") + f"{p.M}x{p.N}x{p.K}"


def write_text(path: pathlib.Path, text: str) -> None:
    """Whole or not at all (shadertune.core.atomic), as write_report writes the JSON."""
    from shadertune.core.atomic import write_text as atomic_write
    atomic_write(path, text)


# --- the GPU side: arrays, the baseline, timing --------------------------------------

class DLPackArray:
    """A CUDA DLPack object that is not a CuPy array or a tensor (a JAX array's
    interface), over a PyTorch tensor: what 'dlpack' operands are."""

    def __init__(self, t):
        self._t, self.shape, self.dtype = t, tuple(t.shape), str(t.dtype).removeprefix("torch.")

    def __dlpack__(self, stream=None, **kw):
        return self._t.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


class Gpu:
    """Device arrays (PyTorch tensors, or CuPy arrays without PyTorch), cuBLAS, the
    float64 reference and CUDA-event timing, all on one stream (PyTorch's current)."""

    def __init__(self):
        arrays = _load_script("bench-cuda-arrays")
        from shadertune.backends.cuda.baseline import plain_fp32
        self.cp = plain_fp32()                     # cuBLAS without TF32 through CuPy too
        self.torch = arrays.torch_mod()            # TF32 off, or None
        if self.torch is not None:
            from shadertune.backends.cuda.call import stream_from_handle
            self.torch.backends.cudnn.allow_tf32 = False
            self.torch.set_float32_matmul_precision("highest")
            # CuPy's current stream (the hold, the events) is PyTorch's
            self.stream = stream_from_handle(self.cp, self.torch.cuda.current_stream().cuda_stream,
                                             self.torch.cuda.current_device())
        else:
            self.stream = self.cp.cuda.get_current_stream()
        self.kind = "torch" if self.torch is not None else "cupy"

    def operands(self, p: Problem, seed: int):
        """Uniform(-1, 1) A (M x K) and B (K x N), stacked for a batch, C-contiguous."""
        shape = (p.batch,) if p.batch > 1 else ()
        if self.torch is None:
            rs = self.cp.random.RandomState(seed)
            return (rs.uniform(-1, 1, shape + (p.M, p.K)).astype(p.dtype),
                    rs.uniform(-1, 1, shape + (p.K, p.N)).astype(p.dtype))
        t = self.torch
        g = t.Generator(device="cuda").manual_seed(seed)
        dt = getattr(t, p.dtype)
        return tuple(t.rand(s, generator=g, device="cuda", dtype=dt) * 2 - 1
                     for s in (shape + (p.M, p.K), shape + (p.K, p.N)))

    def reference(self, A, B):
        if self.torch is None:
            return self.cp.matmul(A.astype(self.cp.float64), B.astype(self.cp.float64))
        return self.torch.matmul(A.double(), B.double())

    def baseline(self, A, B, out):
        """cuBLAS: the product into out."""
        if self.torch is None:
            return self.cp.matmul(A, B, out=out)
        return self.torch.matmul(A, B, out=out)

    def search_operands(self, A, B):
        """A and B as the search times its kernels (CuPy arrays over the same memory)."""
        if self.torch is None:
            return A, B
        return self.cp.asarray(A), self.cp.asarray(B)

    def empty_like_result(self, A, B):
        if self.torch is None:
            return self.cp.empty(A.shape[:-1] + B.shape[-1:], A.dtype)
        return self.torch.empty(A.shape[:-1] + B.shape[-1:], dtype=A.dtype, device="cuda")

    def rel_err(self, out, ref) -> float:
        if self.torch is None:
            return _load_script("bench-cuda").rel_err(self.cp, out, ref)
        t = self.torch
        if not bool(t.isfinite(out).all()):
            return float("inf")
        return float(t.linalg.norm(out.double() - ref) / t.linalg.norm(ref))

    def held_ms(self, fn, repeats: int) -> float:
        from shadertune.backends.cuda.timing import event_times
        return statistics.median(event_times(fn, repeats, warmup=3, hold_stream=True))

    def call_ms(self, fn, repeats: int) -> float:
        """Median ms of single calls as a user times them: events around each, a
        sync after each (timing.call_times on the current stream, PyTorch's)."""
        from shadertune.backends.cuda.timing import call_times
        return statistics.median(call_times(fn, repeats, warmup=3))

    def loop_ms(self, fn, calls: int) -> float:
        cp = self.cp
        fn()
        self.stream.synchronize()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(self.stream)
        for _ in range(calls):
            fn()
        stop.record(self.stream)
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) / calls

    # --- the host table ---------------------------------------------------------------
    def host_kinds(self) -> list:
        """Operand kinds of the host table: CuPy arrays, and with PyTorch, tensors and
        DLPack objects (a JAX array's interface over a tensor)."""
        return ["cupy"] + (["torch", "dlpack"] if self.torch is not None else [])

    def host_operands(self, kind: str, p: Problem, seed: int) -> dict:
        """A, B, out of `kind`, and tA, tB, tout: the same memory as PyTorch tensors
        (torch.matmul's operands; None without PyTorch) and cA, cB, cout as CuPy
        arrays (cupy.matmul's)."""
        cp, t = self.cp, self.torch
        shape = (p.batch,) if p.batch > 1 else ()
        rs = cp.random.RandomState(seed)
        cA = rs.uniform(-1, 1, shape + (p.M, p.K)).astype(p.dtype)
        cB = rs.uniform(-1, 1, shape + (p.K, p.N)).astype(p.dtype)
        cout = cp.empty(shape + (p.M, p.N), p.dtype)
        tA = tB = tout = None
        if t is not None:
            tA, tB, tout = (t.from_dlpack(x) for x in (cA, cB, cout))
        ops = {"cA": cA, "cB": cB, "cout": cout, "tA": tA, "tB": tB, "tout": tout}
        if kind == "cupy":
            ops.update(A=cA, B=cB, out=cout)
        elif kind == "torch":
            ops.update(A=tA, B=tB, out=tout)
        else:
            ops.update(A=DLPackArray(tA), B=DLPackArray(tB), out=None)
        return ops

    def host_baselines(self, ops: dict, with_out: bool) -> dict:
        """{"torch": torch.matmul's call, "cupy": cupy.matmul's} on the same operands
        (torch None without PyTorch)."""
        cp, t = self.cp, self.torch
        res = {"torch": None}
        if t is not None:
            tA, tB, to = ops["tA"], ops["tB"], ops["tout"]
            res["torch"] = (lambda: t.matmul(tA, tB, out=to)) if with_out else (lambda: t.matmul(tA, tB))
        cA, cB, co = ops["cA"], ops["cB"], ops["cout"]
        res["cupy"] = (lambda: cp.matmul(cA, cB, out=co)) if with_out else (lambda: cp.matmul(cA, cB))
        return res

    def host_compare(self, fns: dict, mode: str, rounds: int = HOST_ROUNDS, calls: int = 700,
                     repeats: int = 60) -> dict:
        """{name: microseconds per call} of each fn (ours and the frameworks'), measured
        in turn `rounds` times (ours, torch, cupy, ours, ...), so that the machine's
        busy moments fall on all alike: 'repeated', the least wall time per call of
        its rounds of `calls` calls and one sync; 'single', the median of every call
        timed with events around it and a sync after it. A fn that fails gives its
        error instead (as 'error: ...')."""
        got = {name: [] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                if fn is None or isinstance(got[name], str):
                    continue
                try:
                    if mode == "single":
                        got[name] += [1e3 * t for t in self._call_times(fn, repeats)]
                    else:
                        got[name].append(self.host_us(fn, mode, calls=calls))
                except Exception as e:      # noqa: BLE001 (a call's failure is its row's result)
                    got[name] = f"error: {type(e).__name__}: {e}"[:200]
        return {name: (v if isinstance(v, str) else None if not v
                       else statistics.median(v) if mode == "single" else min(v)) for name, v in got.items()}

    def _call_times(self, fn, repeats: int) -> list:
        from shadertune.backends.cuda.timing import call_times
        for _ in range(5):
            fn()
        return call_times(fn, repeats, warmup=1)

    def host_us(self, fn, mode: str, calls: int = 2000, repeats: int = 200) -> float:
        """'repeated': wall microseconds per call of `calls` calls and one sync (the
        GPU kept fed: for small products the host's pace); 'single': the median of
        `repeats` calls timed with events around each and a sync after each."""
        for _ in range(20):
            fn()
        self.stream.synchronize()
        if mode == "single":
            return 1e3 * self.call_ms(fn, repeats)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        self.stream.synchronize()
        return (time.perf_counter() - t0) / calls * 1e6

    def tolerance(self, p: Problem, seed: int) -> float:
        """bench-cuda's rule, on the inputs the search verifies on."""
        return _load_script("bench-cuda").tolerance(self.cp, p, seed)[0]

    def release(self):
        self.cp.get_default_memory_pool().free_all_blocks()
        if self.torch is not None:
            self.torch.cuda.empty_cache()


# --- one row ---------------------------------------------------------------------------

def repeats_for(ms: float) -> int:
    return _load_script("bench-cuda").repeats_for(ms)


def measure(gpu, fn, ref, rough_ms: float) -> dict:
    """A call's result error, held median ms, single-call ms and loop ms."""
    err = gpu.rel_err(fn(), ref)
    ms = gpu.held_ms(fn, repeats_for(rough_ms))
    return {"error": err, "ms": ms, "call_ms": gpu.call_ms(fn, CALL_REPEATS),
            "loop_ms": gpu.loop_ms(fn, max(20, min(2000, int(LOOP_MS / max(ms, 1e-3)))))}


def bench_row(cls: str, p: Problem, *, gpu, backend, store, tune_seconds: float, seed: int, log) -> dict:
    import shadertune
    from shadertune.search import Budget, tune
    from shadertune.selection.chain import select
    row = {"class": cls, "shape": shape_text(p), "dtype": p.dtype, "problem": p.key, "flops": p.flops,
           "arrays": gpu.kind}
    A, B = gpu.operands(p, seed + 1)
    ref = gpu.reference(A, B)
    out = gpu.empty_like_result(A, B)
    cub = measure(gpu, lambda: gpu.baseline(A, B, out), ref, 1.0)
    row.update(cublas_ms=cub["ms"], cublas_error=cub["error"], cublas_call_ms=cub["call_ms"],
               cublas_loop_ms=cub["loop_ms"])

    def call(config):
        return lambda: shadertune.matmul(A, B, backend=backend, config=config)

    default = backend.default_config(p)
    un = measure(gpu, call("default"), ref, cub["ms"])
    row.update(untuned_ms=un["ms"], untuned_error=un["error"], untuned_call_ms=un["call_ms"],
               untuned_loop_ms=un["loop_ms"], untuned_config=default.to_dict())
    if cls == "large":          # untuned only (see the module docstring)
        row.update(tuned_ms=None, tuned_call_ms=None, search_ms=None, tune_seconds=0)
        return row
    tol = gpu.tolerance(p, seed)
    t0 = time.monotonic()
    entry = tune(backend, p, budget=Budget(seconds=tune_seconds, spend_all=True), store=store, seed=seed,
                 tolerance=tol, on_phase=lambda label: log(f"    {time.monotonic() - t0:6.1f} s  {label}", echo=False))
    best = entry["best"]
    row.update(tune_seconds=entry["seconds"], tolerance=tol, evaluated=entry["evaluated"],
               measured=entry["measured"], search_ms=best["median_ms"] if best else None)
    if best is None:
        row["tuned_error"] = row["tuned_ms"] = row["tuned_call_ms"] = row["tuned_loop_ms"] = None
        return row
    # the store's best under the search's tolerance is the search's best; config="auto"
    # (the default tolerance) takes it unless its error lies between the two (asked
    # without the learned model: a row must not wait for a training)
    picked = select(backend, p, store, tolerance=tol).config
    auto = select(backend, p, store, use_model=False).config
    tu = measure(gpu, call(picked.to_dict()), ref, best["median_ms"])
    # the same call on the operand kind the search times with (CuPy arrays over the same
    # memory): what search_ms is compared with (the tensors' own host cost is the host table's)
    sA, sB = gpu.search_operands(A, B)
    knobs = picked.to_dict()
    row["tuned_call_same_ms"] = gpu.call_ms(lambda: shadertune.matmul(sA, sB, backend=backend, config=knobs),
                                            CALL_REPEATS)
    row.update(tuned_ms=tu["ms"], tuned_error=tu["error"], tuned_call_ms=tu["call_ms"], tuned_loop_ms=tu["loop_ms"],
               tuned_config=picked.to_dict(), search_config=best["config"], auto_takes_it=auto == picked,
               search_timed_as=("calls" if backend.call_timed(p) else "device") if hasattr(backend, "call_timed")
               else "device")
    return row


def ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def markdown(rows: list, head: str, host: list | None = None) -> str:
    f = lambda x, fmt=".3f": "-" if x is None else format(x, fmt)  # noqa: E731
    lines = [head, "",
             "Times in ms. `held`: the device time of the whole call (queued behind a spin kernel); "
             "`call`: one call as a user times it (events around it, a sync after it); `loop`: a loop of "
             "unheld calls, per call. x cuBLAS: cuBLAS's time over ours in the same mode (higher is faster); "
             "search: the search's own median of its best (of calls where the backend times the problem "
             "as calls); tuned call / search: the tuned call on the operands the search times with (CuPy "
             "arrays over the same memory) over the search's median.", "",
             "| class | shape | dtype | cuBLAS held / call | untuned held / call | x cuBLAS held / call "
             "| tuned held / call | x cuBLAS held / call | search | tuned call / search | tune s "
             "| loop: cuBLAS / untuned / tuned | error: cuBLAS / untuned / tuned |",
             "|---|---|---|---|---|---|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['class']} | {r['shape']} | {r['dtype']} | skipped: {r['skipped']} |" + " |" * 10)
            continue
        if r.get("failed"):
            lines.append(f"| {r['class']} | {r['shape']} | {r['dtype']} | failed: {r['failed'][:80]} |" + " |" * 10)
            continue
        g = r.get
        lines.append(
            f"| {r['class']} | {r['shape']} | {r['dtype']} | {f(g('cublas_ms'), '.4f')} / {f(g('cublas_call_ms'), '.4f')} | "
            f"{f(g('untuned_ms'), '.4f')} / {f(g('untuned_call_ms'), '.4f')} | "
            f"**{f(ratio(g('cublas_ms'), g('untuned_ms')), '.2f')}** / **{f(ratio(g('cublas_call_ms'), g('untuned_call_ms')), '.2f')}** | "
            f"{f(g('tuned_ms'), '.4f')} / {f(g('tuned_call_ms'), '.4f')} | "
            f"**{f(ratio(g('cublas_ms'), g('tuned_ms')), '.2f')}** / **{f(ratio(g('cublas_call_ms'), g('tuned_call_ms')), '.2f')}** | "
            f"{f(g('search_ms'), '.4f')} | {f(ratio(g('tuned_call_same_ms') or g('tuned_call_ms'), g('search_ms')), '.2f')} | "
            f"{f(g('tune_seconds'), '.0f')} | {f(g('cublas_loop_ms'), '.4f')} / "
            f"{f(g('untuned_loop_ms'), '.4f')} / {f(g('tuned_loop_ms'), '.4f')} | "
            f"{f(g('cublas_error'), '.1e')} / {f(g('untuned_error'), '.1e')} / "
            f"{f(g('tuned_error'), '.1e')} |")
    if host:
        lines += ["", "Host cost per call (us): shadertune.matmul against torch.matmul and cupy.matmul on the same "
                  "operands, measured in turn (ours, torch, cupy; 3 rounds). `launches`: the express lane's launch "
                  "means (SHADERTUNE_CUDA_LAUNCH). `repeated`: many calls, one sync (the least wall time per call "
                  "of the rounds); `single`: events around each call, a sync after each (median).", "",
                  "| launches | operands | config / db | size | out | mode | ours us | torch us | cupy us "
                  "| ours / torch |",
                  "|---|---|---|---|---|---|---:|---:|---:|---:|"]
        for h in host:
            lines.append(f"| {h.get('means', 'kernels')} | {h['operands']} | {h['db']} | {h['size']} | "
                         f"{'out=' if h['out'] else '-'} | {h['mode']} | "
                         f"{f(h.get('ours_us'), '.1f')} | {f(h.get('torch_us'), '.1f')} | {f(h.get('cupy_us'), '.1f')} | "
                         f"**{f(ratio(h.get('ours_us'), h.get('torch_us')), '.2f')}** |"
                         + (f" {h['error']}" if h.get("error") else ""))
    return "\n".join(lines) + "\n"


def write_files(out: pathlib.Path, doc: dict, head: str) -> None:
    write_report(out / "shape-classes.json", doc)
    write_text(out / "shape-classes.md", markdown(doc["rows"], head, doc.get("host")))


def run(plan, *, out: pathlib.Path, gpu, backend, store, tune_seconds: float, max_seconds: float,
        seed: int, head: str, log, clock=time.monotonic, doc: dict | None = None) -> list:
    """Every row of `plan` ([(class, Problem)]) that fits in max_seconds, the files
    rewritten after each (`doc`: the JSON's other keys, the host table)."""
    doc = {} if doc is None else doc
    rows, t0 = [], clock()
    doc["rows"] = rows
    for cls, p in plan:
        left = max_seconds - (clock() - t0)
        need = (0 if cls == "large" else tune_seconds) + ROW_OVERHEAD_S
        if left < need:
            rows.append({"class": cls, "shape": shape_text(p), "dtype": p.dtype, "problem": p.key,
                         "skipped": f"{left:.0f} s left of --max-seconds {max_seconds:g}"})
            log(f"{cls:13s} {shape_text(p):20s} {p.dtype}: skipped ({rows[-1]['skipped']})")
        else:
            log(f"{cls:13s} {shape_text(p):20s} {p.dtype}: ...")
            try:
                rows.append(bench_row(cls, p, gpu=gpu, backend=backend, store=store, tune_seconds=tune_seconds,
                                      seed=seed, log=log))
            except Exception as e:        # one row failing must not lose the others
                import traceback
                rows.append({"class": cls, "shape": shape_text(p), "dtype": p.dtype, "problem": p.key,
                             "failed": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
            gpu.release()
            r = rows[-1]
            log(f"    cuBLAS {r.get('cublas_ms')} ms (call {r.get('cublas_call_ms')}), untuned {r.get('untuned_ms')} "
                f"(call {r.get('untuned_call_ms')}), tuned {r.get('tuned_ms')} (call {r.get('tuned_call_ms')}, "
                f"search {r.get('search_ms')}), errors {r.get('cublas_error')} / {r.get('untuned_error')} / "
                f"{r.get('tuned_error')}" + (f"  FAILED {r['failed']}" if "failed" in r else ""))
        write_files(out, doc, head)
    return rows


# --- host cost per call (issue 38's host table) ----------------------------------------

DB_KINDS = ("explicit", "knobs", "path", "store", "default")
MEANS = ("kernels", "graphs")     # the express lane's launch means (SHADERTUNE_CUDA_LAUNCH)


def _use_means(means: str, name) -> None:
    """Set the lane's launch means; matmul's door for `name` learns its keys again."""
    import shadertune.front.matmul as front
    os.environ["SHADERTUNE_CUDA_LAUNCH"] = means
    lane = front.door(name).express
    if lane is not None:
        lane.forget()


def host_table(gpu, backend, sizes: list, *, store_path: pathlib.Path, seed: int, log, name="cuda",
               means=MEANS) -> list:
    """The `host` rows (see the module docstring): for each size, a store holding a
    verified result for it (so that 'auto' takes it, 'exact'), then ours against
    torch.matmul / cupy.matmul per operand kind, config source, out, mode and the
    lane's launch means, each row's three measured in turn (Gpu.host_compare).
    matmul is called as users call it, with the backend's name (`name`; a
    Backend object where it has none to be found by)."""
    import shadertune
    from shadertune.db import Store
    from shadertune.search import Budget, tune
    rows = []
    saved = {v: os.environ.get(v) for v in ("SHADERTUNE_DB", "SHADERTUNE_CUDA_LAUNCH")}
    with Store(store_path) as store:
        for p in sizes:
            tune(backend, p, budget=Budget(max_evals=1), store=store, seed=seed)     # the default, verified
        knobs = {p.key: backend.default_config(p).to_dict() for p in sizes}
        os.environ["SHADERTUNE_DB"] = str(store_path)
        try:
            for m in means:
                _use_means(m, name)
                for p in sizes:
                    for kind in gpu.host_kinds():
                        ops = gpu.host_operands(kind, p, seed)
                        for with_out in (False, True) if ops["out"] is not None else (False,):   # (DLPack: no out)
                            base = gpu.host_baselines(ops, with_out)       # {"torch": fn, "cupy": fn}
                            for db in DB_KINDS:
                                config = ("default" if db == "explicit" else knobs[p.key] if db == "knobs" else "auto")
                                where = {"path": str(store_path), "store": store}.get(db)
                                A, B, O = ops["A"], ops["B"], ops["out"] if with_out else None

                                def call(A=A, B=B, O=O, config=config, where=where):
                                    return shadertune.matmul(A, B, O, backend=name, config=config, db=where)
                                for mode in ("repeated", "single"):
                                    got = gpu.host_compare({"ours": call, **base}, mode)
                                    row = {"operands": kind, "db": db, "size": shape_text(p), "mode": mode,
                                           "out": with_out, "means": m}
                                    for who in ("ours", "torch", "cupy"):
                                        v = got.get(who)
                                        row[f"{who}_us"] = None if isinstance(v, str) else v
                                        if isinstance(v, str):
                                            row["error" if who == "ours" else f"{who}_error"] = v
                                    rows.append(row)
                        log(f"host      {m} {shape_text(p)} {kind}: " + ", ".join(
                            f"{r['db']}{'+out' if r['out'] else ''} {r['mode'][0]} {r['ours_us'] or float('nan'):.1f}"
                            f"/{r['torch_us'] or float('nan'):.1f}"
                            for r in rows if r["size"] == shape_text(p) and r["operands"] == kind and r["means"] == m)
                            + " us (ours/torch)")
                    gpu.release()
        finally:
            for v, old in saved.items():
                if old is None:
                    os.environ.pop(v, None)
                else:
                    os.environ[v] = old
            lane = __import__("shadertune.front.matmul", fromlist=["door"]).door(name).express
            if lane is not None:
                lane.forget()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench-shape-classes", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for shape-classes.json / .md (and the store)")
    ap.add_argument("--shapes", help="comma-separated MxNxK or BxMxNxK[:float64] (default: the classes' list)")
    ap.add_argument("--classes", help=f"comma-separated classes of the default list to run ({', '.join(CLASSES)})")
    ap.add_argument("--seconds", "--tune-seconds", dest="tune_seconds", type=float, default=30.0,
                    help="seconds of search per shape (default 30)")
    ap.add_argument("--max-seconds", type=float, default=500.0,
                    help="no row starts that would end past this many seconds from the start (default 500)")
    ap.add_argument("--store", help="the tuning store (default OUT/tune.sqlite)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the search's inputs (default 0)")
    ap.add_argument("--host-sizes", default=HOST_SIZES,
                    help=f"shapes of the host table (n for n^3, or MxNxK; default {HOST_SIZES})")
    ap.add_argument("--no-host", action="store_true", help="skip the host table")
    ap.add_argument("--host-means", default=",".join(MEANS),
                    help="the lane's launch means the host table runs (default kernels,graphs)")
    a = ap.parse_args(argv)
    try:
        plan = ([(classify(p), p) for p in map(parse_shape, a.shapes.split(","))] if a.shapes
                else [(c, parse_shape(s)) for c, s in DEFAULT_SHAPES])
    except ValueError as e:
        ap.error(f"--shapes: {e}")
    if a.classes:
        wanted = [c.strip() for c in a.classes.split(",")]
        unknown = [c for c in wanted if c not in CLASSES]
        if unknown:
            ap.error(f"--classes: unknown {', '.join(map(repr, unknown))} (classes: {', '.join(CLASSES)})")
        plan = [(c, p) for c, p in plan if c in wanted]
    try:
        host_sizes = [] if a.no_host else [parse_shape(f"{x}x{x}x{x}" if x.strip().isdigit() else x)
                                           for x in a.host_sizes.split(",")]
    except ValueError as e:
        ap.error(f"--host-sizes: {e}")
    host_means = [m.strip() for m in a.host_means.split(",") if m.strip()]
    if not host_means or set(host_means) - set(MEANS):
        ap.error(f"--host-means: {', '.join(MEANS)} (comma-separated), got {a.host_means!r}")
    if not a.tune_seconds > 0 or not a.max_seconds > 0:
        ap.error("--seconds and --max-seconds must be > 0")
    t0 = time.monotonic()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    import shadertune.front.matmul
    from shadertune.db import Store
    gpu = Gpu()
    backend = shadertune.front.matmul.backend("cuda")
    info = backend.device().to_dict()
    lines = []

    def log(msg, echo=True):
        if echo:
            print(msg, flush=True)
        lines.append(msg)

    cmd = "python scripts/bench-shape-classes " + " ".join(sys.argv[1:] if argv is None else argv)
    head = (f"Device: {info['renderer']} ({info['driver']}), arrays: {gpu.kind}; "
            f"{time.strftime('%Y-%m-%d %H:%M')}\n\nCommand: `{cmd}`")
    log(head)
    doc = {"device": info, "command": cmd, "rows": [], "host": []}
    with gpu.stream:
        if host_sizes:
            try:
                doc["host"] = host_table(gpu, backend, host_sizes, store_path=out / "host.sqlite", seed=a.seed, log=log,
                                         means=host_means)
            except Exception as e:   # the rows still run
                import traceback
                doc["host_failed"] = traceback.format_exc()
                log(f"host table FAILED: {type(e).__name__}: {e}")
            write_files(out, doc, head)
        with Store(pathlib.Path(a.store) if a.store else out / "tune.sqlite") as store:
            run(plan, out=out, gpu=gpu, backend=backend, store=store, tune_seconds=a.tune_seconds,
                max_seconds=a.max_seconds - (time.monotonic() - t0), seed=a.seed, head=head, log=log, doc=doc)
    write_text(out / "shape-classes.log", "\n".join(lines) + "\n")
    print((out / "shape-classes.md").read_text())
    return 0


if __name__ == "__main__":
    from shadertune.errors import ContextError
    try:
        sys.exit(main())
    except ContextError as e:        # no CUDA device or no CuPy here: one line, no traceback
        sys.exit(f"bench-shape-classes: error: {e}")
