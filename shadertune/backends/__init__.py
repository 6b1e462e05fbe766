"""Backends: GL (fragment shaders, the default) and CUDA (generated kernels)."""
from __future__ import annotations

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


def get_backend(name: str, **options) -> Backend:
    """Instantiate a backend by name ('gl' or 'cuda'); imports lazily."""
    return backend_class(name)(**options)


__all__ = ["Backend", "DeviceInfo", "Kernel", "KnobLayout", "ModelFeatures", "available",
           "backend_class", "get_backend", "registered_classes"]
