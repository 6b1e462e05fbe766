"""The search core: strategies over evaluate(config) -> Result, the evaluator, the CLI.

    from shadertune.search import Budget, tune
    entry = tune(backend, problem, strategy="phased", budget=Budget(max_evals=200), store=Store())
"""
from .budget import Budget, BudgetExhausted, Tracker
from .evaluate import Evaluator, make_inputs, relative_error
from .registry import STRATEGIES, get_strategy
from .report_json import make_report, write_report
from .tune import tune

__all__ = ["Budget", "BudgetExhausted", "Evaluator", "STRATEGIES", "Tracker", "get_strategy",
           "make_inputs", "make_report", "relative_error", "tune", "write_report"]
