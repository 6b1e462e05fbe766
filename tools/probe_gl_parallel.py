#!/usr/bin/env python3
"""Can one process compile GL compute programs in parallel?  GL_KHR_parallel_shader_compile
(the driver compiles on threads of its own; the program is usable once
GL_COMPLETION_STATUS_KHR says so) against compiling one program after another, with the
driver's disk cache off (every compile cold), on disjoint sets of the compute family's
shaders (no in-process reuse between modes).

    source .gl/prelude.sh; python3 tools/probe_gl_parallel.py OUT [--shape 1024x1024x1024]
        [--configs 16] [--threads max,16,4,1]

Writes OUT/parallel.json; prints wall seconds and ms a program for each mode.
(Session 24: a program binary loaded in a new process costs ~270 ms with the disk cache
off: the driver's binary is its intermediate code, so binaries from other processes save
only the front end.)
"""
import argparse
import ctypes as c
import json
import os
import sys
import time

os.environ.setdefault("__GL_SHADER_DISK_CACHE", "0")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))

COMPLETION_STATUS = 0x91B1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="1024x1024x1024")
    ap.add_argument("--configs", type=int, default=16)
    ap.add_argument("--threads", default="max,16",
                    help="driver thread counts to try, each on shaders of its own (max: as many "
                         "as the driver likes)")
    a = ap.parse_args()
    counts = [0xFFFFFFFF if t == "max" else int(t) for t in a.threads.split(",")]
    os.makedirs(a.out, exist_ok=True)
    from probe_gl_compile import sources
    from shadertune.backends.gl.platform import glraw, raw_program as pb
    from shadertune.backends.gl.platform.context import create_egl_context
    ctx = create_egl_context()
    glraw.add_signatures({"glMaxShaderCompilerThreadsKHR": (None, [c.c_uint]),
                          "glMaxShaderCompilerThreadsARB": (None, [c.c_uint])})
    gl = glraw.function
    n = a.configs
    srcs = sources(a.shape, (1 + len(counts)) * n)
    sets = [srcs[i * n:(i + 1) * n] for i in range(1 + len(counts))]
    exts = [e for e in getattr(ctx, "extensions", set()) if "parallel_shader" in e]
    print("renderer", ctx.info.get("GL_RENDERER"), ctx.info.get("GL_VERSION"), "extensions", exts,
          f"{len(srcs)} shaders, mean {sum(map(len, srcs)) / len(srcs):.0f} chars", flush=True)

    def start(src: str) -> int:
        sh, pr = gl("glCreateShader")(pb.COMPUTE_SHADER), gl("glCreateProgram")()
        t = src.encode()
        gl("glShaderSource")(sh, 1, c.byref(c.c_char_p(t)), c.byref(c.c_int(len(t))))
        gl("glCompileShader")(sh)
        gl("glAttachShader")(pr, sh)
        gl("glLinkProgram")(pr)
        gl("glDeleteShader")(sh)
        return pr

    def status(pr: int, what: int) -> int:
        v = c.c_int(0)
        gl("glGetProgramiv")(pr, what, c.byref(v))
        return v.value

    rows = []
    # 1) one after another, each waited for
    t0, each = time.perf_counter(), []
    for s in sets[0]:
        t = time.perf_counter()
        pr = start(s)
        ok = status(pr, pb.LINK_STATUS)
        each.append((time.perf_counter() - t) * 1e3)
        gl("glDeleteProgram")(pr)
    rows.append({"mode": "sequential", "wall_s": time.perf_counter() - t0, "ms_each": each, "ok": ok})
    # 2) and 3) the driver's threads: all started, then polled
    for threads, group in zip(counts, sets[1:]):
        mode = "parallel-" + ("max" if threads == 0xFFFFFFFF else str(threads))
        fn = gl("glMaxShaderCompilerThreadsKHR") or gl("glMaxShaderCompilerThreadsARB")
        if fn is None:
            rows.append({"mode": mode, "error": "no glMaxShaderCompilerThreads entry point"})
            continue
        fn(threads)
        t0 = time.perf_counter()
        progs = [start(s) for s in group]
        issued = time.perf_counter() - t0
        done = {}
        while len(done) < len(progs) and time.perf_counter() - t0 < 120:
            for i, pr in enumerate(progs):
                if i not in done and status(pr, COMPLETION_STATUS):
                    done[i] = (time.perf_counter() - t0) * 1e3
            time.sleep(0.001)
        wall = time.perf_counter() - t0
        # what a build still waits for once the driver says done: the link status, the
        # uniforms' introspection (raw_program.RawProgram), the first dispatch
        oks, link_ms, uni_ms, run_ms = [], [], [], []
        for pr in progs:
            t = time.perf_counter()
            oks.append(status(pr, pb.LINK_STATUS))
            link_ms.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            pb.RawProgram(pr)
            uni_ms.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            gl("glUseProgram")(pr)
            gl("glDispatchCompute")(0, 0, 0)
            ctx.finish()
            run_ms.append((time.perf_counter() - t) * 1e3)
        for pr in progs:
            gl("glDeleteProgram")(pr)
        rows.append({"mode": mode, "threads": threads, "issue_s": issued, "wall_s": wall,
                     "done_ms": [done.get(i) for i in range(len(progs))], "ok": all(oks),
                     "link_status_ms": link_ms, "uniforms_ms": uni_ms, "first_run_ms": run_ms})
    for r in rows:
        print(r["mode"], {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                          if k not in ("mode", "ms_each", "done_ms")},
              "each/done ms:", [round(x) for x in (r.get("ms_each") or r.get("done_ms") or []) if x], flush=True)
        for k in ("link_status_ms", "uniforms_ms", "first_run_ms"):
            if r.get(k):
                print("   ", k, [round(x) for x in r[k]], flush=True)
    json.dump({"shape": a.shape, "configs": n, "extensions": exts, "rows": rows},
              open(os.path.join(a.out, "parallel.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
