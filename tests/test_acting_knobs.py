"""Configs printed with the knobs that act on them (backends.acting, each backend's
knob_layout.acting): a knob left out must be held by the space at its value, so that
the printed config names one kernel; --full-config prints every knob."""
import itertools

import pytest

from shadertune.backends import acting, config_text, get_backend
from shadertune.core.config import Config
from shadertune.core.problem import Problem


def _held(space, cfg: Config, knob: str) -> bool:
    """No other value of `knob` makes a valid config with the rest of `cfg`."""
    return all(space.why_invalid(cfg.replace(**{knob: v})) is not None
               for v in space.knobs[knob] if v != cfg[knob])


def _sample(space, branch_knobs) -> list[Config]:
    """Valid configs spread over the space: the first valid config (in the space's
    binding order) of every combination of the knobs that choose a kernel family or
    path, and all their valid one-knob neighbours."""
    order = space.binding_order()
    seeds = set()
    for values in itertools.product(*(space.knobs[k] for k in branch_knobs)):
        cfg = space.first(dict(zip(branch_knobs, values)), order)
        if cfg is not None:
            seeds.add(cfg)
    found = set(seeds)
    for cfg in seeds:
        for knob in space.knobs:
            found.update(space.neighbours(cfg, knob))
    return sorted(found, key=lambda c: c.key)


def _check(backend: str, space, configs) -> int:
    shown = 0
    for cfg in configs:
        act = acting(backend, cfg)
        assert set(act.items()) <= set(cfg.items())
        for knob in set(cfg) - set(act):
            assert _held(space, cfg, knob), f"{knob} varies for {cfg.to_dict()} but is not printed"
        shown += len(act)
    return shown


@pytest.mark.parametrize("size", [(16, 16, 16), (64, 48, 40)])
def test_gl_knobs_left_out_are_held_by_the_space(gl, size):
    p = Problem(*size)
    space = gl.space(p)
    configs = _sample(space, ("family", "out", "lang")) + [gl.default_config(p)]
    assert len({(c["family"], c["out"], c["lang"]) for c in configs}) > 2
    for name in ("jiang", "naive"):
        configs.append(Config({**gl.default_config(p).to_dict(), **gl.preset_config(name, p)}))
    configs = [c for c in configs if space.why_invalid(c) is None]
    shown = _check("gl", space, configs)
    assert shown < 0.6 * sum(len(c) for c in configs)      # most of the 26 knobs go


def test_gl_fragment_configs_drop_the_compute_knobs(gl):
    cfg = gl.default_config(Problem(64, 64, 64))
    if cfg["family"] != "fragment":
        pytest.skip("a GPU's default is a compute config")
    text = config_text("gl", cfg)
    assert "bm=" not in text and "tn=" not in text and "np=" in text
    assert config_text("gl", cfg, full=True) == cfg.text() and "bm=0" in cfg.text()


@pytest.mark.parametrize("problem", [Problem(256, 256, 256), Problem(64, 40, 512, "float64")])
def test_cuda_knobs_left_out_are_held_by_the_space(problem):
    from shadertune.backends.cuda.space import make_space
    space = make_space(problem, get_backend("cuda").limits())   # sm_90's limits without a GPU
    configs = _sample(space, ("MMA", "KG", "AR", "PS"))
    assert len({c["MMA"] for c in configs}) > 1 and len({c["KG"] for c in configs}) > 1
    _check("cuda", space, configs)


def test_unknown_backends_and_configs_print_whole():
    cfg = Config(a=1, b="x")
    assert acting("fake", cfg) == cfg and config_text("fake", cfg) == "a=1 b=x"
