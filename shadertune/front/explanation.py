"""shadertune.explain: which config matmul(config="auto") runs for given operands, and why.

It sits in the front door's layer: it asks matmul's backend (api.backend) which
problem a call resolves a config for (Backend.problem_of) and then asks the
selection (selection/chain.py) about that problem, reading the store as `auto` does.
"""
from __future__ import annotations

import dataclasses
import os

from numpy.typing import ArrayLike

from .matmul import backend as matmul_backend
from ..backends.base import Backend
from ..db import Store
from ..call.inputs import check_call
from ..names import BackendName
from ..selection import reverify
from ..selection.chain import Selection, select, verdict_text


def explain(A: ArrayLike, B: ArrayLike, *, backend: BackendName | Backend = "gl",
            db: str | os.PathLike[str] | Store | None = None,
            device_index: int | None = None) -> Selection:
    """Which config ``matmul(A, B, backend=backend, config="auto", db=db)`` runs, and why.

    Parameters
    ----------
    A, B : array_like
        The operands of the call, as for :func:`shadertune.matmul` (shapes and dtypes
        are read, nothing is computed).
    backend : {"gl", "cuda"} or Backend, optional
        The backend the call would run on (default ``"gl"``).
    db : str or os.PathLike or Store, optional
        The tuning store ``auto`` reads (default: ``$SHADERTUNE_DB``, else
        ``$XDG_CACHE_HOME/shadertune/tune.sqlite``).  It is only read; a missing
        store is reported, not made.
    device_index : int, optional
        Which device (GL: EGL device; CUDA: device id).

    Returns
    -------
    Selection
        The config, the rule that gave it (``how``: exact, model, analytical,
        nearest or default), the reason in words, the ranked alternatives of the
        model rules and the rules passed over.  Where the config was measured
        elsewhere, ``measured_on`` names that device key (this renderer under
        another driver or GL profile), ``pretuned`` says it comes from the table
        shipped with shadertune, and ``recheck`` that matmul verifies it against
        float64 once before running it (``rechecked``: this process's verdict).  ``str()`` of it is a readable
        explanation; ``to_dict()`` is JSON-ready.

    Raises
    ------
    TypeError, ValueError
        For operands :func:`shadertune.matmul` would refuse (numpy's errors).
    shadertune.errors.ContextError
        When the backend has no device here.

    Notes
    -----
    For GL operands larger than the device's texture limit, matmul works in tiles:
    the selection shown is the one of the main (largest) tile.  CUDA runs a stack as
    one batched problem and reads column-major operands through the trans flags:
    the selection shown is the one of that problem.

    Examples
    --------
    >>> import numpy as np, shadertune
    >>> s = shadertune.explain(np.ones((64, 32)), np.ones((32, 16)))
    >>> s.how in ("exact", "model", "analytical", "nearest", "default")
    True
    """
    be = matmul_backend(backend, device_index)
    call = check_call(A, B, None, alpha=1.0, beta=0.0, dtypes=be.dtypes)
    problem, note = be.problem_of(call)
    s = select(be, problem, db)
    if s.recheck:         # a config measured elsewhere: what this process's check found, if it ran
        verdict = reverify.known(be, problem, s.config)
        if verdict is not None:
            s = dataclasses.replace(s, rechecked=verdict_text(verdict))
    return dataclasses.replace(s, passed_over=s.passed_over + (note,)) if note else s
