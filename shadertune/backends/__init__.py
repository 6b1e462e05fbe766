"""Backends: GL (fragment shaders, the default) and CUDA (generated kernels)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.config import Config
from .base import Backend, DeviceInfo, Kernel, KnobLayout, ModelFeatures

_REGISTRY = {
    "gl": "shadertune.backends.gl:GLBackend",
    "cuda": "shadertune.backends.cuda:CUDABackend",
}


def available() -> list[str]:
    return list(_REGISTRY)


def backend_class(name: str) -> type[Backend]:
    """The Backend class registered as `name` ('gl' or 'cuda'); imports lazily."""
    import importlib
    if name not in _REGISTRY:
        raise ValueError(f"unknown backend {name!r}; expected one of {available()}")
    mod, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(mod), cls)


def registered_classes() -> list[type[Backend]]:
    """The registered Backend classes that can be imported here (a report or a saved
    model asks their class attributes: knob_layout, model_features)."""
    out = []
    for name in _REGISTRY:
        try:
            out.append(backend_class(name))
        except ImportError:
            continue
    return out


def acting(backend: str, config: Mapping[str, Any]) -> Config:
    """The knobs of `config` that act on its kernel on backend `backend` (by registered
    name: its knob_layout.acting; no device needed): what a table or a message prints
    of a config.  The whole config for a backend without that rule or not registered
    here, and where the rule does not know the config (it raises KeyError,
    ValueError or TypeError)."""
    cfg = config if isinstance(config, Config) else Config(config)
    rule = None
    if backend in _REGISTRY:
        try:
            rule = backend_class(backend).knob_layout.acting
        except ImportError:
            rule = None
    if rule is None:
        return cfg
    try:
        names = set(rule(cfg))
    except (KeyError, ValueError, TypeError):
        return cfg
    return Config({k: v for k, v in cfg.items() if k in names})


def config_text(backend: str, config: Mapping[str, Any], *, full: bool = False) -> str:
    """`config` as every table and message writes it: 'knob=value ...' by knob name,
    the knobs that act on it only (acting) unless `full`."""
    cfg = config if isinstance(config, Config) else Config(config)
    return (cfg if full else acting(backend, cfg)).text()


def get_backend(name: str, **options) -> Backend:
    """Instantiate a backend by name ('gl' or 'cuda'); imports lazily."""
    return backend_class(name)(**options)


def load_backend(name: str) -> Backend:
    """A backend by registered name, or `module:Class` of a Backend subclass (another
    backend, as every command line's --backend takes it).  ShadertuneError names what
    failed (the import, the class, the instance); ContextError (no device) passes."""
    import importlib

    from ..errors import ContextError, ShadertuneError
    if ":" not in name:
        return get_backend(name)
    mod, cls = name.split(":", 1)
    try:
        obj = getattr(importlib.import_module(mod), cls)
    except Exception as e:               # ImportError, AttributeError, or the module's own error
        raise ShadertuneError(f"cannot load backend {name!r}: {type(e).__name__}: {e}") from None
    if not (isinstance(obj, type) and issubclass(obj, Backend)):
        raise ShadertuneError(f"cannot load backend {name!r}: {mod}.{cls} is not a shadertune "
                              f"Backend class (a subclass of shadertune.backends.Backend)")
    try:
        return obj()
    except ContextError:
        raise
    except Exception as e:
        raise ShadertuneError(f"cannot create backend {name!r}: {type(e).__name__}: {e}") from None


def check_environment(name: str) -> None:
    """The environment variables backend `name` reads (Backend.check_environment),
    checked before anything touches a store: ValueError names the variable.  An unknown
    name is left to load_backend, and a module:Class backend is checked when it loads."""
    if ":" in name:
        return
    try:
        cls = backend_class(name)
    except (KeyError, ValueError):
        return
    cls.check_environment()


__all__ = ["Backend", "DeviceInfo", "Kernel", "KnobLayout", "ModelFeatures", "acting", "available",
           "backend_class", "check_environment", "config_text", "get_backend", "load_backend",
           "registered_classes"]
