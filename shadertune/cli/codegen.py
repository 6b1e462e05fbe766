"""python -m shadertune.codegen: print a generated kernel, in the spirit of Jiang's codegen.py.

    python -m shadertune.codegen --size 512 --mc 1x4 --unroll 4 --np 32 --mrt 2x2
    python -m shadertune.codegen --size 512 -p 32 -m 2 -n 2 -c 1x4 -u     (Jiang's flags)
    python -m shadertune.codegen --backend cuda --size 4096 --BM 128 --BN 128 --MMA 3
    python -m shadertune.codegen --size 64 --config '{"mc": "2x2"}'
    python -m shadertune.codegen --size 64 --list-knobs | --list-space

Any knob of the backend's space is set with --KNOB VALUE (--list-knobs shows them
with their domains for the problem).  Knobs left unset come from the problem's
default config; where that default does not fit the knobs given, the valid
config closest to it (fewest other knobs changed) is printed, and stderr says
what changed.
"""
from __future__ import annotations

import argparse
import difflib
import itertools
import json
import sys

from . import args as ca
from ..core.config import Config
from ..core.problem import Problem

# Jiang's -c numbered the channel layouts; the shapes are the knob's own values.
CHANNEL_CODES = {"1": "1x1", "2": "1x2", "3": "1x3", "4": "1x4", "5": "2x2"}


class UsageError(ValueError):
    """A knob or value the space does not have; the message is one line."""


def build_parser() -> argparse.ArgumentParser:
    p = ca.tool_parser(
        "codegen", "Print the kernel shadertune generates for one config, or list the knobs "
                   "and every valid config.",
        "Any knob of the backend's space: --KNOB VALUE (e.g. --mc 1x4 --unroll 4 --np 32; "
        "cuda: --BM 128 --MMA 3); --list-knobs shows them. Unset knobs come from the "
        "problem's default config.  Errors: one line 'shadertune.codegen: error: <reason>', "
        "exit status 2.", raw=False)
    p.add_argument("--backend", choices=["gl", "cuda"], default="gl", help="whose kernel (default gl)")
    p.add_argument("--size", required=True, metavar="SIZE",
                   help=f"{ca.SIZE_HELP}; M,N,K too")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="element type (default float32)")
    p.add_argument("--trans-a", action="store_true", help="A stored transposed")
    p.add_argument("--trans-b", action="store_true", help="B stored transposed")
    p.add_argument("--config", help="knobs as JSON (a partial config is filled from the default; "
                                    "--KNOB options override it)")
    p.add_argument("--list-knobs", action="store_true", help="print each knob, its domain and default")
    p.add_argument("--list-space", action="store_true", help="print every valid config as JSON lines")
    g = p.add_argument_group("GL knobs by Jiang's codegen.py flags (aliases of --KNOB VALUE)")
    g.add_argument("-p", dest="alias_np", metavar="NP", help="k-values per pass (--np)")
    g.add_argument("-m", "--mrt-height", "--mrt_height", dest="alias_mrt_h", metavar="H",
                   help="render-target grid height (--mrt_h)")
    g.add_argument("-n", "--mrt-width", "--mrt_width", dest="alias_mrt_w", metavar="W",
                   help="render-target grid width (--mrt_w)")
    g.add_argument("--mrt", dest="alias_mrt", metavar="HxW", help="both at once, e.g. 4x2")
    g.add_argument("-c", "--channel", dest="alias_mc", metavar="MC",
                   help="RGBA channel use (--mc): 1x1, 1x2, 1x3, 1x4, 2x2 (or Jiang's codes 1-5)")
    g.add_argument("-u", dest="alias_unroll", action="store_const", const="full",
                   help="fully unroll the loop of a pass (--unroll full)")
    return p


def _knob_options(rest: list[str]) -> dict[str, str]:
    """'--KNOB VALUE' / '--KNOB=VALUE' pairs left over by the fixed options."""
    out, i = {}, 0
    while i < len(rest):
        arg = rest[i]
        if not arg.startswith("--") or arg == "--":
            raise UsageError(f"unexpected argument {arg!r}: knobs are given as --KNOB VALUE")
        name, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(rest) or rest[i + 1].startswith("--"):
                raise UsageError(f"--{name} needs a value")
            value, i = rest[i + 1], i + 1
        out[name] = value
        i += 1
    return out


def _aliases(args) -> dict[str, str]:
    given = {}
    if args.alias_mrt is not None:
        h, x, w = args.alias_mrt.lower().partition("x")
        if not x:
            raise UsageError(f"--mrt takes HxW (e.g. 4x2), got {args.alias_mrt!r}")
        given["mrt_h"], given["mrt_w"] = h, w
    for knob in ("np", "mrt_h", "mrt_w", "unroll"):
        v = getattr(args, f"alias_{knob}")
        if v is not None:
            given[knob] = v
    if args.alias_mc is not None:
        given["mc"] = CHANNEL_CODES.get(args.alias_mc, args.alias_mc)
    return given


def _knob_name(name: str, knobs) -> str:
    if name in knobs:
        return name
    alt = name.replace("-", "_")
    if alt in knobs:
        return alt
    close = difflib.get_close_matches(alt, list(knobs), n=1, cutoff=0.6)
    hint = f"; did you mean --{close[0]}?" if close else ""
    raise UsageError(f"unknown knob --{name} for this space (knobs: {', '.join(knobs)}){hint}")


def _domain_text(dom) -> str:
    vals = [str(v) for v in dom]
    return ", ".join(vals) if len(vals) <= 12 else ", ".join(vals[:6] + ["...", *vals[-3:]])


def _knob_value(name: str, text, dom):
    """The domain value spelled `text` (4 -> 4, 'full', '330'); JSON values pass as they are."""
    if not isinstance(text, str):
        if text in dom:
            return text
        text = json.dumps(text)
    for v in dom:
        if str(v) == text or (isinstance(v, bool) and text.lower() == str(v).lower()):
            return v
    raise UsageError(f"--{name} {text}: not in its domain for this problem ({_domain_text(dom)})")


def resolve(space, default: Config, given: dict) -> tuple[Config, dict]:
    """The config with the `given` knobs and the default's others; where that is not valid,
    the valid config with the given knobs that changes the fewest others (ties: knob, then
    domain order).  Returns (config, {knob: (default value, value used)} for changed knobs).

    One or two changed knobs are tried directly; beyond that the space is enumerated."""
    cfg = default.replace(**given)
    why = space.why_invalid(cfg)
    if why is None:
        return cfg, {}
    free = [k for k in default if k not in given]

    def changes(c):
        return {k: (default[k], c[k]) for k in free if c[k] != default[k]}
    for r in (1, 2):
        for ks in itertools.combinations(free, r):
            for vals in itertools.product(*(space.knobs[k] for k in ks)):
                c = cfg.replace(**dict(zip(ks, vals)))
                if c in space:
                    return c, changes(c)
    fits = [c for c in space.configs() if all(c[k] == v for k, v in given.items())]
    if not fits:
        shown = " ".join(f"{k}={v}" for k, v in given.items())
        raise UsageError(f"no valid config has {shown}: {why}")
    best = min(fits, key=lambda c: len(changes(c)))
    return best, changes(best)


def _list_knobs(space, default: Config, out) -> None:
    for name, dom in space.knobs.items():
        out.write(f"--{name:8s} {_domain_text(dom)}   (default {default[name]})\n")


def main(argv=None) -> int:
    args, rest = build_parser().parse_known_args(argv)
    try:
        size = ca.size(args.size)
        problem = Problem(size.M, size.N, size.K, args.dtype, args.trans_a, args.trans_b, size.batch)
        from ..backends import get_backend
        backend = get_backend(args.backend)
        space = backend.space(problem)
        given = dict(Config.from_json(args.config)) if args.config else {}
        given.update(_aliases(args))
        given.update(_knob_options(rest))
        given = {(k := _knob_name(n, space.knobs)): _knob_value(k, v, space.knobs[k]) for n, v in given.items()}
        if (args.list_space or args.list_knobs) and given:
            raise UsageError(f"--list-{'space' if args.list_space else 'knobs'} lists the problem's "
                             f"whole space: it takes no knobs (given: {', '.join(given)})")
        if args.list_space:
            for cfg in space.configs():
                sys.stdout.write(json.dumps(cfg.to_dict(), sort_keys=True) + "\n")
            print(f"# {len(space)} valid of {space.full_size} configs for {problem.label}", file=sys.stderr)
            return 0
        if args.list_knobs:
            _list_knobs(space, Config(backend.default_config(problem)), sys.stdout)
            return 0
        default = Config(backend.default_for(problem, given))    # the default of the path given knobs name
        cfg, changed = resolve(space, default, given)
        if changed:
            moved = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
            print(f"# the default config does not fit the knobs given; changed {moved}", file=sys.stderr)
        sys.stdout.write(backend.source(problem, cfg))
        return 0
    except BrokenPipeError:
        return 0
    except Exception as e:
        return ca.fail("codegen", e, 2)


if __name__ == "__main__":
    sys.exit(main())
