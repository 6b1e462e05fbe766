"""The learners a performance model may use (scikit-learn, the `model` extra).

Each is built fresh by name. DEFAULT was chosen by measurement: leave-
problems-out validation on real stores (two H200 CUDA runs, an llvmpipe GL
sample) and a synthetic one, scored by how close the config a learner ranks
first comes to the best measured config of each held-out problem. Extremely
randomised trees led on the GPU stores and gradient boosting on the synthetic
one; the average of the two was within a point of the best on each store (the
most even), the MLP and the linear model behind (notes/perfmodel.md;
`python -m shadertune.perfmodel train --compare`).
"""
from __future__ import annotations

from ..core.optional import optional_import
from ..errors import ShadertuneError

DEFAULT = "extratrees+hgb"


class ModelUnavailable(ShadertuneError):
    """No learned model can be built here (scikit-learn missing, too little data)."""


def sklearn():
    """The sklearn module, or ModelUnavailable saying how to get it."""
    optional_import("sklearn.ensemble", "the learned performance model needs scikit-learn; "
                    "install it with `pip install shadertune[model]`", error=ModelUnavailable)
    import sklearn
    return sklearn


def one_thread():
    """Context in which fits and predictions use one thread: on a shared machine
    OpenMP's threads oversubscribe the cores (HistGradientBoosting on 110 rows,
    2 busy cores: fit 7.5 s with its threads, 0.4 s with one; ranking 2000
    configs 2.1 s vs 0.08 s), and the data here is small."""
    from threadpoolctl import threadpool_limits   # a scikit-learn dependency
    return threadpool_limits(1)


def make(name: str, seed: int = 0):
    """A new, unfitted regressor `name`."""
    sklearn()
    from sklearn.ensemble import (ExtraTreesRegressor, HistGradientBoostingRegressor, RandomForestRegressor,
                                  VotingRegressor)
    from sklearn.linear_model import Ridge
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    builders = {
        # gradient-boosted trees: strong on tabular data, fit in well under a second here
        "hgb": lambda: HistGradientBoostingRegressor(max_iter=300, learning_rate=0.08,
                                                     min_samples_leaf=5, random_state=seed),
        "forest": lambda: RandomForestRegressor(n_estimators=150, min_samples_leaf=2,
                                                random_state=seed, n_jobs=1),
        # the default: 100 trees of at most 1024 leaves keep a saved model under ~12 MB
        # however large the store grows (200 trees of 2-row leaves: 13.6 MB at 1000 rows)
        "extratrees": lambda: ExtraTreesRegressor(n_estimators=100, min_samples_leaf=3,
                                                  max_leaf_nodes=1024, random_state=seed, n_jobs=1),
        # ISAAC's choice: a small MLP on standardised features
        "mlp": lambda: make_pipeline(StandardScaler(), MLPRegressor(
            hidden_layer_sizes=(64, 64), alpha=1e-3, max_iter=800, early_stopping=True,
            random_state=seed)),
        "ridge": lambda: make_pipeline(StandardScaler(), Ridge(alpha=1.0)),
    }
    # the default: the mean of the two trees' predictions
    builders["extratrees+hgb"] = lambda: VotingRegressor([("extratrees", builders["extratrees"]()),
                                                          ("hgb", builders["hgb"]())])
    try:
        return builders[name]()
    except KeyError:
        raise ValueError(f"unknown learner {name!r}; expected one of {sorted(builders)}") from None


NAMES = ("extratrees+hgb", "extratrees", "hgb", "forest", "mlp", "ridge")
