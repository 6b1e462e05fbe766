"""A search table's runs, as the search command line and its cluster step keep them:
one DeviceRun per device (its finished problems' report entries and the problems in
progress, ProblemRun), the budget each problem gets (search_budget), and the file a
device's report goes to (report_paths).  Both steps import them from here: nothing is
handed from one command line to the other."""
from __future__ import annotations

import logging
import pathlib

from ..backends import config_text
from ..core.problem import Problem
from ..search.budget import Budget
from ..search.progress import Progress
from ..search.report_json import problem_entry

log = logging.getLogger("shadertune.search")

# Seconds per problem on a software renderer when neither --budget nor --time-limit is
# given: llvmpipe measures a 1024^3 config in seconds, and Jiang's full order takes hours.
SOFTWARE_TIME_LIMIT = 30.0


def search_budget(args, device) -> Budget:
    """The budget of each problem of a search on `device`: --budget and --time-limit as
    given; on a software renderer with neither, SOFTWARE_TIME_LIMIT seconds (said once,
    as a warning).  The search on this machine and its cluster step both take it."""
    seconds = args.time_limit
    if seconds is None and args.budget is None and (device.limits or {}).get("software_renderer"):
        seconds = SOFTWARE_TIME_LIMIT
        log.warning("%s is a software renderer: each problem stops starting evaluations after "
                    "%g s (--time-limit S to change, 0: no limit)", device.renderer, seconds)
    # a time limit the user gave is search time asked for: it is spent, not cut short by
    # convergence (the software renderer's implicit limit is only a cap)
    return Budget(args.budget, seconds or None, spend_all=bool(args.time_limit))


class ProblemRun:
    """One problem being searched: what the report needs if the search stops part-way."""

    def __init__(self, problem: Problem, progress: Progress, backend: str | None = None):
        self.problem = problem
        self.progress = progress
        self.backend = backend       # its name: the log lines print the knobs that act
        self.results = []
        self.cached = []
        self.phases: list[dict] = []     # the strategy's phases as they began (report_json)
        self.t0 = progress.clock()

    def phase(self, label: str) -> None:
        self.phases.append({"at": len(self.results), "label": label})
        self.progress.phase(label)

    def record(self, result, cached: bool, worker: str | None = None) -> None:
        """One Result of this search (`worker`: the cluster worker that measured it)."""
        self.results.append(result)
        if cached:
            self.cached.append(result.config)
        self.progress.update(result, cached, worker)
        if log.isEnabledFor(logging.INFO):
            r = result
            what = (f"{r.median_ms:.4g} ms, {r.gflops or 0:.3g} GFLOP/s, error {r.error or 0:.1e}"
                    if r.ok else r.message)
            log.info("%s %s: %s: %s%s", self.problem.label, config_text(self.backend or "", r.config),
                     r.status, what,
                     " (cached)" if cached else "")

    def with_replayed_seconds(self, entry: dict, store, backend, device) -> dict:
        """entry["seconds"]: this run's seconds plus those the store records for measuring
        the results it replayed, so that a report rebuilt from the store carries the
        original search time; entry["run_seconds"]: this run's alone."""
        replayed, unknown = store.measured_seconds(backend.name, device.key, self.problem,
                                                   backend.template_hash(), self.cached)
        if unknown:
            log.info("%s: %d replayed results have no measuring time on record (stored before "
                     "schema version 3)", self.problem.label, unknown)
        entry["run_seconds"] = entry["seconds"]
        entry["seconds"] = round(entry["seconds"] + replayed, 6)
        return entry

    def incomplete_entry(self, store, backend, device) -> dict:
        from ..db import space_sizes
        size, full = space_sizes(store, backend, self.problem, backend.space(self.problem))
        entry = problem_entry(self.problem, self.results, space_size=size, full_space_size=full,
                              measured=len(self.results) - len(self.cached),
                              cached=len(self.cached), seconds=self.progress.clock() - self.t0,
                              phases=self.phases)
        entry["incomplete"] = True
        return self.with_replayed_seconds(entry, store, backend, device)


class DeviceRun:
    """One device's part of a table: the entries of its finished problems and the
    problems in progress (one at a time here; a cluster tunes several at once)."""

    def __init__(self, backend, device):
        self.backend = backend
        self.device = device
        self.entries: dict[Problem, dict] = {}
        self.current: dict[Problem, ProblemRun] = {}

    def start(self, problem: Problem, progress: Progress) -> ProblemRun:
        self.current[problem] = ProblemRun(problem, progress, self.backend.name)
        return self.current[problem]

    def finish(self, problem: Problem, entry: dict, store) -> None:
        current = self.current.pop(problem)
        self.entries[problem] = current.with_replayed_seconds(entry, store, self.backend, self.device)

    def stop(self, store) -> None:
        """The search stopped: each problem still in progress that has results becomes an
        incomplete entry."""
        for problem, current in self.current.items():
            current.progress.close(incomplete=True)
            if current.results:
                try:
                    self.entries[problem] = current.incomplete_entry(store, self.backend, self.device)
                except (Exception, KeyboardInterrupt) as e:      # a second Ctrl-C, a failing store
                    log.warning("no report entry for %s in progress: %s", problem.label,
                                str(e) or type(e).__name__)
        self.current.clear()

    def ordered(self, problems: list[Problem]) -> list[dict]:
        """The entries in the order of the table."""
        return [self.entries[p] for p in problems if p in self.entries]


def report_paths(path: str, count: int) -> list[str]:
    """--report's file per device: as given for one, r.json -> r.0.json, r.1.json, ...
    for several."""
    if count == 1:
        return [path]
    p = pathlib.Path(path)
    return [str(p.with_name(f"{p.stem}.{i}{p.suffix}")) for i in range(count)]


__all__ = ["DeviceRun", "ProblemRun", "SOFTWARE_TIME_LIMIT", "report_paths", "search_budget"]
