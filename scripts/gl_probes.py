"""What the measurement scripts (probe-gl-compute, bench-gl-compute) read from NVIDIA's
GL driver beside timings: the machine code it made for a program, and the warps a
kernel keeps resident on an SM; and cuBLAS's time for the same product (cublas_ms).
Not a test, not a library.

The driver keeps compiled programs in its disk cache ($__GL_SHADER_DISK_CACHE_PATH,
set before the context is made: use_disk_cache): zstd frames that hold an 'NVuc'
record whose header says where its machine code lies (size at 0x44, offset at 0x48).
The driver writes the cache when the context's process ends: a config's programs are those
the cache of a child process that built it holds beyond a child that only made the backend
(sass_of_configs); `nvdisasm -b SM90` (the CUDA toolkit) reads them.
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import statistics
import subprocess
import tempfile

ZSTD_MAGIC = bytes((0x28, 0xB5, 0x2F, 0xFD))


def cublas_ms(p, repeats: int = 20) -> float | None:
    """torch's SGEMM (TF32 off) of problem p's shape on random operands: CUDA events,
    median after warm-up; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.rand(p.M, p.K, device="cuda") - 0.5
    b = torch.rand(p.K, p.N, device="cuda") - 0.5
    for _ in range(5):
        torch.mm(a, b)
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.mm(a, b)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def use_disk_cache(cache_dir: str) -> None:
    """Make NVIDIA's driver write every program it compiles into cache_dir (call before
    the GL context is made)."""
    os.makedirs(cache_dir, exist_ok=True)
    os.environ["__GL_SHADER_DISK_CACHE"] = "1"
    os.environ["__GL_SHADER_DISK_CACHE_PATH"] = cache_dir
    os.environ["__GL_SHADER_DISK_CACHE_SKIP_CLEANUP"] = "1"


def driver_programs(cache_dir: str) -> dict:
    """The machine code of every program in the driver's disk cache, by record hash (none
    where the driver keeps no such cache: Mesa's)."""
    found = {}
    unpack = None
    for root, _, files in os.walk(cache_dir):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            at = data.find(ZSTD_MAGIC)
            if at >= 0 and unpack is None:
                unpack = zstd_frame_decoder()
            while at >= 0:
                start, at = at, data.find(ZSTD_MAGIC, at + 4)
                rec = unpack(data[start:])
                if rec is None:
                    continue
                if rec[:4] == b"NVuc" and len(rec) > 0x50:
                    size = int.from_bytes(rec[0x44:0x48], "little")
                    off = int.from_bytes(rec[0x48:0x4c], "little")
                    found[hash(rec)] = rec[off:off + size]
    return found


def zstd_frame_decoder():
    """A function: bytes that start with a zstd frame -> that frame decompressed (bytes
    after it ignored), or None where it does not decode.  The zstandard module where it is
    installed, else the system's libzstd through ctypes (every Linux with apt or systemd
    has it: the GPU machine has no zstandard wheel)."""
    try:
        import zstandard
    except ImportError:
        pass
    else:
        def with_module(data: bytes):
            try:
                return zstandard.ZstdDecompressor().decompressobj().decompress(data)
            except zstandard.ZstdError:
                return None
        return with_module
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    lib.ZSTD_findFrameCompressedSize.restype = ctypes.c_size_t
    lib.ZSTD_findFrameCompressedSize.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
    lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    lib.ZSTD_getFrameContentSize.argtypes = (ctypes.c_char_p, ctypes.c_size_t)
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompress.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_isError.argtypes = (ctypes.c_size_t,)

    def with_libzstd(data: bytes):
        size = lib.ZSTD_findFrameCompressedSize(data, len(data))
        if lib.ZSTD_isError(size):
            return None
        content = lib.ZSTD_getFrameContentSize(data, size)
        if content == (1 << 64) - 2:                       # not a frame
            return None
        # a frame written by a stream need not say its size: grow the room until it fits
        room = content if content < 1 << 30 else 16 * size
        while room <= 1 << 30:
            out = ctypes.create_string_buffer(max(1, room))
            got = lib.ZSTD_decompress(out, room, data, size)
            if not lib.ZSTD_isError(got):
                return out.raw[:got]
            room *= 4
        return None
    return with_libzstd


def disassemble(code: bytes) -> str:
    tool = shutil.which("nvdisasm")
    if tool is None:
        return "nvdisasm not found\n"
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(code)
        f.flush()
        r = subprocess.run([tool, "-b", "SM90", f.name], capture_output=True, text=True)
    return r.stdout + r.stderr


def instructions(sass: str) -> list[tuple[int, str, str]]:
    """nvdisasm's instructions: (address, opcode with its modifiers, operands), a guard
    predicate left out."""
    return [(int(a, 16), op, rest) for a, op, rest in
            re.findall(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9.]+)([^;]*);", sass)]


def summary(sass: str) -> dict:
    """The highest register, the instruction mix and the main loop's ratios: FFMA per
    shared-memory load, LDS.128 among them, global loads, barriers."""
    regs = [int(x) for x in re.findall(r"\bR(\d+)\b", sass)]
    ins = instructions(sass)
    ops = collections.Counter(op.split(".")[0] for _, op, _ in ins)
    wide = collections.Counter(op for _, op, _ in ins if op.startswith(("LDS", "LDG", "STS")))
    lds = ops.get("LDS", 0)
    return {"max_register": max(regs, default=-1), "ops": dict(ops.most_common(16)),
            "memory_ops": dict(wide.most_common(8)),
            "ffma_per_lds": round(ops.get("FFMA", 0) / lds, 2) if lds else None,
            "instructions": sum(ops.values()), "spills": ops.get("LDL", 0) + ops.get("STL", 0),
            "loop": main_loop(ins)}


def main_loop(ins: list[tuple[int, str, str]]) -> dict | None:
    """The longest loop among `ins` (instructions: a branch back to a lower address): its
    length in instructions, its mix (FFMA's share is the most the FMA pipes can reach), and
    where in it the global loads are issued against the first and last FFMA (a prefetch
    that hides latency issues its loads before the FMAs it overlaps)."""
    backs = [(int(m.group(1), 16), a) for a, op, rest in ins if op == "BRA"
             for m in [re.search(r"0x([0-9a-f]+)", rest)] if m and int(m.group(1), 16) < a]
    if not backs:
        return None
    lo, hi = max(backs, key=lambda b: b[1] - b[0])
    body = [op for a, op, _ in ins if lo <= a <= hi]
    kinds = collections.Counter(op.split(".")[0] for op in body)
    ffma = [i for i, op in enumerate(body) if op.startswith("FFMA")]
    loads = [i for i, op in enumerate(body) if op.startswith(("LDG", "TLD", "TEX"))]
    return {"instructions": len(body), "ffma": kinds.get("FFMA", 0),
            "ffma_share": round(kinds.get("FFMA", 0) / max(1, len(body)), 3),
            "lds": kinds.get("LDS", 0), "sts": kinds.get("STS", 0), "bar": kinds.get("BAR", 0),
            "global_loads": len(loads), "spills": kinds.get("LDL", 0) + kinds.get("STL", 0),
            "loads_before_first_ffma": sum(1 for i in loads if ffma and i < ffma[0]),
            "loads_after_last_ffma": sum(1 for i in loads if ffma and i > ffma[-1])}


def resident_warps(be, p, cfg, A, B) -> int | None:
    """The most warps of this config resident on one SM at once: the kernel built with
    probe_warps records the highest warp slot each SM ran it in (NVIDIA's
    GL_NV_shader_thread_group; None elsewhere)."""
    import numpy as np
    from shadertune.backends.gl.compute.codegen import compute_source, reduce_source
    from shadertune.backends.gl.compute.driver import ComputeKernel
    from shadertune.backends.gl.compute.layout import ComputeLayout
    if "GL_NV_shader_thread_group" not in set(be.ctx.extensions):
        return None
    L = ComputeLayout.plan(p, cfg)
    buf = be.ctx.buffer(reserve=4 * 1024)
    buf.clear()
    k = ComputeKernel(be.ctx, p, cfg, L, compute_source(L, cfg, probe_warps=True),
                      reduce_source(L) if L.reduces else None, pool=be.pool, transfers=be.transfers)
    try:
        buf.bind_to_storage_buffer(4)
        k.run(A, B)
        return int(np.frombuffer(buf.read(), np.uint32).max())
    finally:
        k.release()
        buf.release()


def sass_of_configs(p, configs, cache_dir) -> tuple[list[dict], str]:
    """The driver's machine code of each compute config at problem p: per config its
    programs' summaries, and the disassembly text.  NVIDIA's driver writes its disk cache
    when a process's context ends, not when a program is built: each config is built in a
    child process of its own (python gl_probes.py build ...) with a fresh cache folder,
    beside a child that only makes the backend; the programs the first holds and the
    second does not are the config's.  The children make their own backend on the GL
    device SHADERTUNE_GL_DEVICE names (inherited), the caller's where it names none."""
    import json
    import sys
    rows, text = [], []

    def child(folder, cfg) -> str:
        cmd = [sys.executable, os.path.abspath(__file__), "build", folder, f"{p.M}x{p.N}x{p.K}",
               json.dumps(None if cfg is None else dict(cfg))]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return "" if r.returncode == 0 else (r.stdout + r.stderr)[-2000:]

    base_dir = os.path.join(cache_dir, "backend-only")
    failure = child(base_dir, None)
    base = set(driver_programs(base_dir)) if not failure else set()
    for i, cfg in enumerate(configs):
        folder = os.path.join(cache_dir, f"config-{i}")
        row = {"config": dict(cfg), "programs": []}
        failure = child(folder, cfg)
        if failure:
            row["failure"] = failure
        found = driver_programs(folder)
        for h, code in sorted(found.items(), key=lambda kv: -len(kv[1])):
            if h in base:
                continue
            sass = disassemble(code)
            row["programs"].append(summary(sass))
            text.append(f"==== config {i}: {dict(cfg)}\n{sass}")
        rows.append(row)
    return rows, "".join(text)


def _build_main(argv) -> int:
    """python gl_probes.py build CACHE_DIR MxNxK CONFIG_JSON|null: make the GL backend with
    the driver's disk cache in CACHE_DIR and, unless null, build the compute config at
    M x N x K; the cache is written when this process ends."""
    import json
    import sys
    folder, shape, cfg = argv
    use_disk_cache(folder)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from shadertune.backends.gl import GLBackend
    from shadertune.core.config import Config
    from shadertune.core.problem import Problem
    be = GLBackend()
    be.device()
    cfg = json.loads(cfg)
    if cfg is not None:
        M, N, K = map(int, shape.split("x"))
        with be.build(Problem(M, N, K), Config(cfg)):
            be.ctx.finish()
    return 0


if __name__ == "__main__":
    import sys
    if sys.argv[1:2] == ["build"]:
        sys.exit(_build_main(sys.argv[2:]))
    sys.exit("usage: gl_probes.py build CACHE_DIR MxNxK CONFIG_JSON|null")
