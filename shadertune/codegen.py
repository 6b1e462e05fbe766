"""python -m shadertune.codegen: print a generated kernel, in the spirit of Jiang's codegen.py.

    python -m shadertune.codegen --backend gl --size 512,512,512 -u -p 32 -m 2 -n 2 -c 4
    python -m shadertune.codegen --backend gl --size 64 --config '{"mc": "2x2", ...}'
    python -m shadertune.codegen --backend gl --size 64 --list-space
"""
from __future__ import annotations

import argparse
import json
import sys

from .config import Config
from .problem import Problem

CHANNEL_CODES = {1: "1x1", 2: "1x2", 3: "1x3", 4: "1x4", 5: "2x2"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m shadertune.codegen",
        description="Print the kernel shadertune generates for one config, or list every valid config.")
    p.add_argument("--backend", choices=["gl", "cuda"], default="gl")
    p.add_argument("--size", required=True, help="N (square) or M,N,K")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--trans-a", action="store_true", help="(cuda) A stored transposed")
    p.add_argument("--trans-b", action="store_true", help="(cuda) B stored transposed")
    p.add_argument("--config", help="a whole config as JSON (overrides the GL short options)")
    p.add_argument("--list-space", action="store_true", help="print every valid config as JSON lines")
    g = p.add_argument_group("GL knobs (Jiang's codegen.py options)")
    g.add_argument("-u", "--unroll", action="store_true", help="fully unroll the loop of a pass")
    g.add_argument("-p", "--np", type=int, help="k-iterations per pass (default: the default config's)")
    g.add_argument("-m", "--mrt-height", "--mrt_height", dest="mrt_h", type=int, help="MRT grid height")
    g.add_argument("-n", "--mrt-width", "--mrt_width", dest="mrt_w", type=int, help="MRT grid width")
    g.add_argument("-c", "--channel", type=int, choices=sorted(CHANNEL_CODES),
                   help="RGBA channel use: 1=1x1 2=1x2 3=1x3 4=1x4 5=2x2")
    g.add_argument("--glsl", choices=["330", "450"], help="GLSL version")
    g.add_argument("--fetch", choices=["texelFetch", "texture"], help="fetch style")
    return p


def _gl_config(args, backend, problem) -> Config:
    space = backend.space(problem)
    base = Config(glsl="330", fetch="texelFetch", unroll=1, np=4, mc="1x1", mrt_h=1, mrt_w=1)
    changes = {}
    if args.np is not None:
        changes["np"] = args.np
    if args.mrt_h is not None:
        changes["mrt_h"] = args.mrt_h
    if args.mrt_w is not None:
        changes["mrt_w"] = args.mrt_w
    if args.channel is not None:
        changes["mc"] = CHANNEL_CODES[args.channel]
    if args.unroll:
        changes["unroll"] = "full"
    if args.glsl:
        changes["glsl"] = args.glsl
    if args.fetch:
        changes["fetch"] = args.fetch
    # Jiang's default np=1 is one scalar k; here the smallest pass is one texel step (4 k).
    cfg = base.replace(**changes)
    why = space.why_invalid(cfg)
    if why:
        raise ValueError(f"config {cfg.to_dict()} is not valid for {problem.key}: {why}")
    return cfg


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        problem = Problem.parse(args.size, dtype=args.dtype)
        problem = Problem(problem.M, problem.N, problem.K, args.dtype, args.trans_a, args.trans_b)
        from .backends import get_backend
        backend = get_backend(args.backend)
        if args.list_space:
            space = backend.space(problem)
            out = sys.stdout
            for cfg in space.configs():
                out.write(json.dumps(cfg.to_dict(), sort_keys=True) + "\n")
            print(f"# {len(space)} valid of {space.full_size} configs for {problem.key}", file=sys.stderr)
            return 0
        if args.config:
            cfg = Config.from_json(args.config)
            why = backend.space(problem).why_invalid(cfg)
            if why:
                raise ValueError(f"config {cfg.to_dict()} is not valid for {problem.key}: {why}")
        elif args.backend == "gl":
            cfg = _gl_config(args, backend, problem)
        else:
            cfg = backend.default_config(problem)
        sys.stdout.write(backend.source(problem, cfg))
        return 0
    except BrokenPipeError:
        return 0
    except Exception as e:
        print(f"shadertune.codegen: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
