"""quick_init: a faster __init__ for the frozen dataclasses made on every call.

A frozen dataclass's generated __init__ sets each field through
object.__setattr__ (its own __setattr__ refuses): about 1 us for ten fields,
paid several times by every shadertune.matmul call (a call's host cost).
quick_init gives the class an __init__ of the same signature (fields in order,
the same defaults) that fills the instance's __dict__ at once.  Everything else is the dataclass's: equality, hash, repr,
dataclasses.replace, and setting an attribute afterwards still raises
FrozenInstanceError.  Only for classes without __post_init__ or
default_factory fields.
"""
from __future__ import annotations

import dataclasses


def quick_init(cls):
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if hasattr(cls, "__post_init__") or any(f.default_factory is not dataclasses.MISSING for f in fields):
        raise TypeError(f"quick_init: {cls.__name__} needs the dataclass's own __init__")
    params, defaults = [], {}
    for f in fields:
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            defaults[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
    items = ", ".join(f"{f.name!r}: {f.name}" for f in fields)
    src = f"def __init__(self, {', '.join(params)}):\n    self.__dict__.update({{{items}}})\n"
    ns: dict = {}
    exec(src, defaults, ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    return cls
