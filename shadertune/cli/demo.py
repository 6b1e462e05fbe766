"""python -m shadertune.demo: the README's main job on the device at hand.

Tunes the GL matmul for a small table of sizes (phased search, results kept
in the tuning store), then multiplies with the tuned kernel through
shadertune.matmul(config="auto") and prints renderer, config, GFLOP/s and
the error against a float64 numpy reference.
"""
from __future__ import annotations

import sys

import numpy as np

from . import args as ca


def build_parser():
    p = ca.tool_parser("demo", __doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=ca.sizes, default=None, help="square sizes to tune, comma-separated "
                   "(default: 128,256 on llvmpipe, 512,1024,2048 on a GPU)")
    p.add_argument("--budget", type=ca.positive, default=40, help="evaluations per size (default 40)")
    p.add_argument("--time-limit", type=ca.seconds, default=24.0,
                   help="seconds per size (default 24; 0: no limit)")
    ca.add_db(p)
    return p


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.sizes and any(not q.M == q.N == q.K or q.batch > 1 for q in args.sizes):
        p.error("--sizes: the demo tunes squares: give N,N,... (python -m shadertune.search "
                "tunes any shape)")

    from ..front import matmul as api
    from ..errors import ShadertuneError
    from ..core.problem import Problem
    from ..db.location import store_path
    try:
        path = store_path(args.db)          # no store location: an argument error, before the device
    except (ShadertuneError, ValueError) as e:
        p.error(str(e))
    try:
        from ..db import Store
        from ..perfmodel.tuning_run import TuningRun
        from ..search import Budget
        backend = api.backend("gl")
        dev = backend.device()
        software = bool(dev.limits.get("software_renderer"))
        sizes = [p.M for p in args.sizes] if args.sizes else \
            ([128, 256] if software else [512, 1024, 2048])
        print(f"renderer : {dev.renderer}")
        print(f"driver   : {dev.driver}")
        print(f"limits   : draw buffers {dev.limits['max_draw_buffers']}, "
              f"texture {dev.limits['max_texture_size']}")
        store = Store(path)
        print(f"store    : {store.path}")
        with TuningRun(backend, store) as tuning:      # tune, then train the model
            for n in sizes:
                entry = tuning.search(Problem(n, n, n), strategy="phased",
                                      budget=Budget(max_evals=args.budget, seconds=args.time_limit or None))
                b = entry["best"]
                print(f"tuned {n:5d}: {entry['evaluated']} configs ({entry['measured']} measured, "
                      f"{entry['cached']} from the store) of {entry['space_size']} in "
                      f"{entry['seconds']:.1f} s; best {b['gflops']:.2f} GFLOP/s"
                      if b else f"tuned {n}: no correct config found")
        n = sizes[-1]
        rng = np.random.default_rng(0)
        A = rng.standard_normal((n, n)).astype(np.float32)
        B = rng.standard_normal((n, n)).astype(np.float32)
        from ..selection.chain import select_config
        cfg, how = select_config(backend, Problem(n, n, n), db=store)
        C = api.matmul(A, B, config=cfg)
        kern = api.kernel(backend, Problem(n, n, n), cfg)
        ms = float(np.median(kern.time(repeats=5, warmup=1)))
        ref = A.astype(np.float64) @ B.astype(np.float64)
        err = float(np.linalg.norm(C - ref) / np.linalg.norm(ref))
        print(f"\nmatmul {n}x{n}x{n} on {dev.renderer}")
        print(f"config   : {cfg.to_dict()} ({how})")
        clock = "GL timer" if getattr(kern, "timing_source", None) == "query" else "wall clock around glFinish"
        print(f"speed    : {2 * n ** 3 / ms / 1e6:.2f} GFLOP/s ({ms:.3f} ms, {clock}, median of 5)")
        print(f"error    : {err:.2e} relative to numpy float64")
        if err > 1e-5:
            return ca.fail("demo", f"the tuned kernel's error {err:.2e} is over 1e-5")
        return 0
    # the work failed (no GL context, an unusable store): 1, as in every tool; bad
    # arguments were refused above with 2
    except KeyboardInterrupt:
        return ca.fail("demo", "interrupted; results measured so far are in the store", 130)
    except (ShadertuneError, ValueError) as e:
        return ca.fail("demo", e, 1)
    except OSError as e:
        return ca.fail("demo", ca.os_error_text(e), 1)


if __name__ == "__main__":
    sys.exit(main())
