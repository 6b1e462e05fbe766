"""The search core: strategies over evaluate(config) -> Result, and the evaluator.

    from shadertune.search import Budget, tune
    entry = tune(backend, problem, budget=Budget(seconds=60), store=Store())
"""
from .budget import Budget, BudgetExhausted, Tracker
from .contract import BaseEvaluator, FunctionEvaluator
from .evaluate import Evaluator, make_inputs, make_operands, relative_error
from .options import SearchOptions
from .registry import STRATEGIES, get_strategy
from .report_json import make_report, write_report
from .tune import ProblemCostModel, tune

__all__ = ["BaseEvaluator", "Budget", "BudgetExhausted", "Evaluator", "FunctionEvaluator",
           "ProblemCostModel", "STRATEGIES", "SearchOptions", "Tracker", "get_strategy", "make_inputs",
           "make_operands", "make_report", "relative_error", "tune", "write_report"]
