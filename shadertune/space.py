"""Space: knob domains, restrictions and the constants they may refer to.

A restriction is either a callable taking the config (a Config) and returning
truthy for a valid point, or a Python expression string over the knob names
and the space's `constants` (problem sizes, device limits), as in Kernel
Tuner: ``"mrt_w * mrt_h <= max_draw_buffers"``.  Pruning happens here,
before anything is compiled.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Union

from .config import Config

Restriction = Union[str, Callable[[Config], bool]]

# Names an expression restriction may use besides knobs and constants.
_SAFE_BUILTINS = {"min": min, "max": max, "abs": abs, "len": len, "int": int,
                  "ceil": math.ceil, "floor": math.floor, "log2": math.log2,
                  "True": True, "False": False, "None": None}


class Space:
    def __init__(self, knobs: Mapping[str, Sequence[Any]],
                 restrictions: Sequence[Restriction] = (),
                 constants: Mapping[str, Any] | None = None,
                 phases: Mapping[str, Any] | None = None):
        if not knobs:
            raise ValueError("a Space needs at least one knob")
        self.knobs: dict[str, tuple] = {}
        for name, dom in knobs.items():
            dom = tuple(dom)
            if not dom:
                raise ValueError(f"knob {name!r} has an empty domain")
            if len(set(dom)) != len(dom):
                raise ValueError(f"knob {name!r} has repeated values: {dom}")
            self.knobs[name] = dom
        self.constants = dict(constants or {})
        clash = set(self.constants) & set(self.knobs)
        if clash:
            raise ValueError(f"constants shadow knobs: {sorted(clash)}")
        self.restrictions = list(restrictions)
        self._compiled = [self._compile(r) for r in self.restrictions]
        self._valid: list[Config] | None = None
        # How the phased strategy walks this space (backend-specific order):
        # {"outer": [knobs enumerated in full, outermost first],
        #  "refine": knob searched over powers of two, then refined recursively,
        #  "groups": [[knobs searched jointly], ...] after the refine knob}
        self.phases = dict(phases) if phases else None
        if self.phases:
            named = list(self.phases.get("outer", [])) + [self.phases.get("refine")] + \
                [k for g in self.phases.get("groups", []) for k in g]
            bad = [k for k in named if k is not None and k not in self.knobs]
            if bad:
                raise ValueError(f"phase plan names unknown knobs: {bad}")

    def _compile(self, r: Restriction) -> Callable[[Config], bool]:
        if callable(r):
            return r
        if not isinstance(r, str):
            raise TypeError(f"restriction must be a callable or an expression string, got {r!r}")
        code = compile(r, f"<restriction {r!r}>", "eval")
        unknown = set(code.co_names) - set(self.knobs) - set(self.constants) - set(_SAFE_BUILTINS)
        if unknown:
            raise ValueError(f"restriction {r!r} names unknown knobs or constants: {sorted(unknown)}")
        consts = dict(self.constants)

        def check(cfg: Config, code=code) -> bool:
            return bool(eval(code, {"__builtins__": _SAFE_BUILTINS}, {**consts, **cfg}))
        return check

    # --- membership -----------------------------------------------------
    def why_invalid(self, cfg: Mapping) -> str | None:
        """None if `cfg` is a valid point, else a one-line reason."""
        cfg = cfg if isinstance(cfg, Config) else Config(cfg)
        missing = set(self.knobs) - set(cfg)
        if missing:
            return f"missing knobs: {sorted(missing)}"
        extra = set(cfg) - set(self.knobs)
        if extra:
            return f"unknown knobs: {sorted(extra)}"
        for name, dom in self.knobs.items():
            if cfg[name] not in dom:
                return f"{name}={cfg[name]!r} not in {list(dom)}"
        for r, f in zip(self.restrictions, self._compiled):
            try:
                ok = f(cfg)
            except Exception as e:  # a restriction that cannot be evaluated rejects
                return f"restriction {_describe(r)} failed: {e}"
            if not ok:
                return f"restriction {_describe(r)} not met"
        return None

    def __contains__(self, cfg: Mapping) -> bool:
        return self.why_invalid(cfg) is None

    # --- enumeration ----------------------------------------------------
    @property
    def full_size(self) -> int:
        """Points before restrictions: the product of the domain sizes."""
        return math.prod(len(d) for d in self.knobs.values())

    def _iter_valid(self) -> Iterator[Config]:
        names = list(self.knobs)
        for values in itertools.product(*self.knobs.values()):
            cfg = Config(dict(zip(names, values)))
            if all(_safe(f, cfg) for f in self._compiled):
                yield cfg

    def configs(self) -> list[Config]:
        """Every valid config, in domain order (cached)."""
        if self._valid is None:
            self._valid = list(self._iter_valid())
        return list(self._valid)

    def __iter__(self) -> Iterator[Config]:
        return iter(self.configs())

    def __len__(self) -> int:
        return len(self.configs())

    def neighbours(self, cfg: Config, knob: str) -> list[Config]:
        """Valid configs that differ from `cfg` only in `knob`."""
        out = []
        for v in self.knobs[knob]:
            c = cfg.replace(**{knob: v})
            if c in self:
                out.append(c)
        return out

    def describe(self) -> dict:
        return {"knobs": {k: list(v) for k, v in self.knobs.items()},
                "restrictions": [_describe(r) for r in self.restrictions],
                "full_size": self.full_size, "size": len(self)}


def _safe(f, cfg) -> bool:
    try:
        return bool(f(cfg))
    except Exception:
        return False


def _describe(r: Restriction) -> str:
    if isinstance(r, str):
        return repr(r)
    return getattr(r, "__doc__", None) or getattr(r, "__name__", repr(r))
