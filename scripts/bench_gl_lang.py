#!/usr/bin/env python3
"""Jiang's question for today's drivers: does tuned generated assembly beat tuned GLSL?
(a benchmark script, not a test; issue 33).

    scripts/bench-gl-lang OUT [--sizes 1024,4096] [--seconds 18] [--langs glsl,arbfp,nvfp]
        [--repeats 10] [--db STORE]

For each size, the render-target path (out=mrt, Jiang's kernel) is tuned once per
language through the search core (the phased strategy, --seconds each, on the
space narrowed as `python -m shadertune.search --fix family=fragment --fix out=mrt
--fix lang=L` narrows it, with the knobs the language holds fixed too; GLSL at
glsl 330, which 450 matched within 1% on the H200 and within 5% on llvmpipe, so
its search time goes to fetch, unroll, np, mc and the grid).
Then every language's best, GLSL's best knobs written in each assembly language
(the language alone, at GLSL's optimum), the hand-written baselines (the expert 4x4
RGBA + 4-target algorithm as GLSL and as ARBfp assembly) and, where the backend's
context is a compatibility-profile one, GLSL's best again in a core-profile context,
are verified on sampled rows against float64 and timed warm in three interleaved
rounds (GL timer queries, median of --repeats): the ratios are taken in this one run.

Writes OUT/bench-gl-lang.json (device, limits, every search's summary and results,
every timed row) and OUT/bench-gl-lang.md (the table), both again after each size,
and keeps every result in the store (OUT/tune.sqlite unless --db).  A language the driver does not
run (NVfp outside NVIDIA's driver, assembly without a compatibility-profile context)
is listed with the reason.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from project_venv import use_project_venv  # noqa: E402

ROOT = use_project_venv("moderngl", "numpy")

import numpy as np  # noqa: E402

from shadertune.core.atomic import write_json, write_text  # noqa: E402
from shadertune.backends.gl import GLBackend, handtuned  # noqa: E402
from shadertune.backends.gl.asm.space import ASM_FETCH, ASM_GLSL, LANGS  # noqa: E402
from shadertune.backends.gl.platform.timing import ensure_clock  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.db import Store  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.search import Budget  # noqa: E402
from shadertune.search.evaluate import make_operands  # noqa: E402
from shadertune.search.restrict import RestrictedBackend  # noqa: E402
from shadertune.search.tune import tune  # noqa: E402
from shadertune.core.texttable import text_table  # noqa: E402

# The knobs each language's search holds (see the docstring): the subspace is the one
# `search --fix family=fragment --fix out=mrt --fix lang=L --fix ...` searches.
HELD = {"glsl": {"glsl": ("330",)},
        "arbfp": {"glsl": (ASM_GLSL,), "fetch": (ASM_FETCH["arbfp"],), "unroll": ("full",)},
        "nvfp": {"glsl": (ASM_GLSL,), "fetch": (ASM_FETCH["nvfp"],)}}


def subspace(lang: str) -> dict:
    return {"family": ("fragment",), "out": ("mrt",), "lang": (lang,), **HELD[lang]}


def gflops(p: Problem, ms: float) -> float:
    return p.flops / (ms * 1e6)


def timed_rows(kernels, p: Problem, repeats: int, rounds: int = 3) -> list[dict]:
    """Each kernel (label, config, backend, make: a Kernel maker, or a note why there is
    none) built and verified on sampled rows against float64, then all timed warm in
    `rounds` interleaved rounds (GL timer queries; a row's median over its rounds), so
    that drift of the device's clock or load falls on every row alike; a kernel that
    fails is a row with its reason."""
    A, B = make_operands(p, seed=1)
    idx = np.linspace(0, p.M - 1, min(64, p.M)).astype(int)
    ref = A[idx].astype(np.float64) @ B.astype(np.float64)
    rows, live = [], []
    with contextlib.ExitStack() as stack:
        for label, cfg, backend, make in kernels:
            row = {"kernel": label, "config": cfg}
            rows.append(row)
            if not callable(make):
                row.update(status="skipped", note=make)
                continue
            try:
                backend.ctx                        # its context current (GLBackend.ctx)
                k = stack.enter_context(make())
                C = k.run(A, B)
                err = float(np.linalg.norm(C[idx] - ref) / np.linalg.norm(ref))
            except Exception as e:                 # a kernel that cannot run says why
                row.update(status="failed", message=f"{type(e).__name__}: {e}"[:400])
                continue
            row.update(status="ok" if np.isfinite(err) and err <= 1e-4 else "wrong", error_rows=err,
                       np=k.layout.np, times_ms=[])
            if row["status"] == "ok":
                live.append((row, backend, k))
        per_round = max(1, -(-repeats // rounds))
        for r in range(rounds):
            for row, backend, k in live:
                backend.ctx
                ensure_clock(k.ctx)
                row["times_ms"] += k.time(repeats=per_round, warmup=3 if r == 0 else 1)
    for row, _, _ in live:
        row["ms"] = statistics.median(row["times_ms"])
        row["gflops"] = gflops(p, row["ms"])
    return rows


def search(backend, p: Problem, lang: str, seconds: float, store) -> dict:
    """The phased search of one language's render-target subspace: its summary and results."""
    t0 = time.monotonic()
    entry = tune(RestrictedBackend(backend, subspace(lang)), p, strategy="phased",
                 budget=Budget(seconds=seconds), store=store)
    statuses: dict = {}
    for r in entry["results"]:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    failed = [r["message"] for r in entry["results"] if r["status"] in ("compile_failed", "run_failed")]
    best = entry.get("best")
    return {"lang": lang, "wall_seconds": round(time.monotonic() - t0, 2), "evaluated": entry["evaluated"],
            "space_size": entry["space_size"], "statuses": statuses, "first_failures": failed[:3],
            "best_config": best["config"] if best else None,
            "search_gflops": best["gflops"] if best else None, "results": entry["results"]}


def in_language(space, config, lang: str):
    """`config` (a GLSL render-target config) written in `lang`: the same blocking and
    depth, the knobs the language holds (its unroll where it has loops); None where the
    space has no such config."""
    if config is None:
        return None
    held = {k: v[0] for k, v in HELD[lang].items()}
    cand = Config({**config, "lang": lang, **held})
    return cand.to_dict() if space.why_invalid(cand) is None else None


def core_profile_backend(backend):
    """The same device in a core-profile context (where the backend's is a compatibility-
    profile one): GLSL's best timed there too says what the profile costs GLSL."""
    from shadertune.backends.gl.platform.context import create_egl_context
    if not backend.device().limits.get("compat_profile"):
        return None
    before = os.environ.get("SHADERTUNE_GL_PROFILE")
    os.environ["SHADERTUNE_GL_PROFILE"] = "core"
    try:
        ctx = create_egl_context(backend.device_index)
    except Exception:
        return None
    finally:
        if before is None:
            os.environ.pop("SHADERTUNE_GL_PROFILE")
        else:
            os.environ["SHADERTUNE_GL_PROFILE"] = before
    return GLBackend(backend.device_index, ctx=ctx)


def table(doc: dict) -> str:
    rows = []
    for size in doc["sizes"]:
        at = [r for r in doc["rows"] if r["n"] == size]
        glsl = next((r.get("gflops") for r in at if r["kernel"] == "tuned glsl" and r["status"] == "ok"),
                    None)
        for r in at:
            if r["status"] == "ok":
                x = f"{r['gflops'] / glsl:.2f}" if glsl else "-"
                cfg = r.get("config")
                note = (" ".join(f"{k}={v}" for k, v in sorted(cfg.items()) if k in
                                 ("mc", "mrt_h", "mrt_w", "unroll")) if cfg else r.get("note", ""))
                rows.append([size, r["kernel"], f"{r['gflops']:.1f}", x, r.get("np", "-"), note])
            else:
                why = r.get("message") or r.get("note") or f"error {r.get('error_rows')}"
                rows.append([size, r["kernel"], r["status"], "-", "-", why])
    searches = [[s["n"], s["lang"], s["evaluated"], s["space_size"], s["wall_seconds"],
                 ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items())),
                 s["search_gflops"] and round(s["search_gflops"], 1)] for s in doc["searches"]]
    lines = [f"Render-target path (out=mrt) per language on {doc['device']['renderer']} "
             f"({doc['device']['driver']}); every row timed in this one run, GL timer queries, median of "
             f"{doc['repeats']}; search: phased, {doc['seconds']:g} s a language.", "",
             text_table(["n", "kernel", "GFLOP/s", "x tuned GLSL", "np", "config / note"], rows, "rlrrrl"),
             "", "Searches (the subspace each language was tuned on, what it evaluated):", "",
             text_table(["n", "lang", "evaluated", "of", "seconds", "statuses", "best in the search (GFLOP/s)"],
                        searches, "rlrrrlr")]
    for s in doc["searches"]:
        if s["first_failures"]:
            lines.append(f"\n{s['n']} {s['lang']}: configs that failed, the first: {s['first_failures'][0]}")
    for lang, why in doc["skipped_langs"].items():
        lines.append(f"\n{lang}: not run here ({why}).")
    return "\n".join(lines) + "\n"


def write(out: str, doc: dict) -> str:
    """Write OUT/bench-gl-lang.json and .md (atomically); the table."""
    write_json(os.path.join(out, "bench-gl-lang.json"), doc)
    md = table(doc)
    write_text(os.path.join(out, "bench-gl-lang.md"), md)
    return md


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench-gl-lang", description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--sizes", default="1024,4096")
    ap.add_argument("--seconds", type=float, default=18.0, help="phased search time of one language at one size")
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--db", help="the store (default OUT/tune.sqlite)")
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        langs = [s.strip() for s in args.langs.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--sizes takes integers, got {args.sizes!r}")
    bad = [lang for lang in langs if lang not in LANGS]
    if bad or not langs or any(n < 1 for n in sizes) or args.seconds <= 0 or args.repeats < 1:
        ap.error(f"--langs takes {', '.join(LANGS)}; --sizes, --seconds and --repeats positive numbers")
    os.makedirs(args.out, exist_ok=True)
    be = GLBackend()
    dev = be.device()
    limits = dev.limits
    print(f"GL device: {dev.renderer} | {dev.driver}\nassembly limits: {limits.get('asm_limits')}", flush=True)
    doc = {"device": dev.to_dict(), "sizes": sizes, "seconds": args.seconds, "repeats": args.repeats,
           "searches": [], "rows": [], "skipped_langs": {}}
    running = [lang for lang in langs if lang == "glsl" or lang in (limits.get("asm_limits") or {})]
    for lang in langs:
        if lang not in running:
            doc["skipped_langs"][lang] = (f"the context runs no {lang} (needs a compatibility-profile context "
                                          f"with its extension; this one: {dev.driver})")
    store = Store(args.db or os.path.join(args.out, "tune.sqlite"))
    core = None
    try:
        for n in sizes:
            p = Problem(n, n, n)
            best = {}
            for lang in running:
                s = search(be, p, lang, args.seconds, store)
                doc["searches"].append({"n": n, **s})
                best[lang] = s["best_config"]
                print(f"{n} search {lang}: {s['evaluated']} evaluated in {s['wall_seconds']} s, {s['statuses']}, "
                      f"best {s['search_gflops']}", flush=True)
            kernels = [(f"tuned {lang}", cfg, be, lambda cfg=cfg: be.build(p, cfg))
                       for lang, cfg in best.items() if cfg is not None]
            kernels += [(f"tuned {lang}", None, be, "no config of its search ran")
                        for lang, cfg in best.items() if cfg is None]
            # the language alone: GLSL's best knobs (blocking, depth) written in each assembly
            for lang in running:
                same = in_language(be.space(p), best.get("glsl"), lang)
                if lang != "glsl" and same is not None and same != best.get(lang):
                    kernels.append((f"tuned glsl's knobs in {lang}", same, be, lambda c=same: be.build(p, c)))
            kernels.append(("hand-written glsl (expert 4x4 + 4 targets)", None, be,
                            lambda: handtuned.build(be, p, "expert-4x4-mrt")))
            asm_ok, asm_note = handtuned.assembly_support(be)
            kernels.append(("hand-written arbfp (expert 4x4 + 4 targets)", None, be,
                            (lambda: handtuned.build_assembly(be, p)) if asm_ok else asm_note))
            if best.get("glsl") is not None:
                core = core or core_profile_backend(be)
                if core is not None:
                    kernels.append(("tuned glsl, core-profile context", best["glsl"], core,
                                    lambda: core.build(p, best["glsl"])))
            for row in timed_rows(kernels, p, args.repeats):
                row["n"] = n
                doc["rows"].append(row)
                print(f"{n} {row['kernel']}: {row.get('gflops') or row['status']}", flush=True)
            md = write(args.out, doc)           # after each size: a run cut short keeps what it did
    finally:
        store.close()
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
