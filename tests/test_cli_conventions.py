"""One CLI convention for every tool (issue 31 item 3, shadertune/cli/args.py): every parser
walked (search, db, report, perfmodel, codegen, cluster, demo): usage names
`python -m shadertune.TOOL`, every option has help text, common
options work before and after the subcommand, one size syntax, one error line."""
import argparse

import pytest

from shadertune import cli

# every tool of the command-line wing, by its parser
TOOLS = {name: cli.module(name).build_parser for name in cli.TOOLS}
# what each subcommand needs besides the common options, to parse at all
REQUIRED = {("db", "import"): ["x.jsonl"], ("report", "show"): ["r.json"],
            ("report", "compare"): ["a.json", "b.json"], ("report", "landscape"): ["s.sqlite"],
            ("report", "trajectory"): ["r.json"], ("cluster", "worker"): ["tcp://h:8786"]}


def subparsers(p: argparse.ArgumentParser) -> dict:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def walk(tool):
    top = TOOLS[tool]()
    yield None, top
    yield from subparsers(top).items()


def options(p):
    return [a for a in p._actions if a.option_strings and not isinstance(
        a, (argparse._HelpAction, argparse._VersionAction))]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_option_and_argument_has_help_and_usage_names_the_command(tool):
    for name, p in walk(tool):
        want = f"python -m shadertune.{tool}" + (f" {name}" if name else "")
        assert p.prog == want, (p.prog, want)
        assert p.format_usage().startswith(f"usage: {want} ")
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            where = f"{want} {'/'.join(a.option_strings) or a.dest}"
            assert a.help and a.help is not argparse.SUPPRESS and a.help.strip(), f"{where}: no help"


@pytest.mark.parametrize("tool", TOOLS)
def test_common_options_work_before_and_after_the_subcommand(tool, tmp_path):
    top = TOOLS[tool]()
    subs = subparsers(top)
    common = [a for a in options(top)]
    if not subs:
        assert tool in ("search", "codegen", "demo")     # no subcommand: one place for options
        return
    for a in common:
        flag = a.option_strings[-1]
        value = "gl" if a.dest == "backend" else str(tmp_path / "s.sqlite")    # --db: a folder that is there
        for name, sub in subs.items():
            assert flag in [s for o in options(sub) for s in o.option_strings], (tool, name, flag)
            rest = REQUIRED.get((tool, name), [])
            before = TOOLS[tool]().parse_args([flag, value, name, *rest])
            after = TOOLS[tool]().parse_args([name, *rest, flag, value])
            neither = TOOLS[tool]().parse_args([name, *rest])
            assert getattr(before, a.dest) == getattr(after, a.dest) == value, (tool, name, flag)
            assert getattr(neither, a.dest) == a.default, (tool, name, flag)


def test_the_tools_that_share_a_store_take_db_in_both_places():
    for tool in ("db", "perfmodel"):
        assert "--db" in [s for a in options(TOOLS[tool]()) for s in a.option_strings]


@pytest.mark.parametrize("argv", [
    ("search", ["--size", "64x32x16"]), ("search", ["--sizes", "64x32x16,8"]),
    ("db", ["best", "--problem", "64x32x16"]), ("perfmodel", ["explain", "--size", "64x32x16"]),
])
def test_one_size_syntax(argv):
    tool, args = argv
    a = TOOLS[tool]().parse_args(args)
    got = a.sizes[0] if tool == "search" and a.sizes else (a.problem if tool == "db" else a.size)
    assert (got.M, got.N, got.K) == (64, 32, 16)
    from shadertune.report.sources import parse_problem
    assert parse_problem("64x32x16 f32 NT") == {"M": 64, "N": 32, "K": 16, "dtype": "float32",
                                                "trans_a": False, "trans_b": True}
    assert parse_problem("64")["K"] == 64


@pytest.mark.parametrize("tool, argv, text", [
    ("search", ["--size", "8x"], "argument --size: size must be"),
    ("db", ["best", "--problem", "8x"], "argument --problem: size must be"),
    ("perfmodel", ["explain", "--size", "8x"], "argument --size: size must be"),
    ("search", ["--seed", "-1", "--size", "8"], "argument --seed: must be at least 0, got -1"),
    ("perfmodel", ["sample", "--seed", "-1"], "argument --seed: must be at least 0, got -1"),
    ("search", ["--size", "8", "--tolerance", "0"], "argument --tolerance: must be greater than 0"),
    ("db", ["best", "--tolerance", "0"], "argument --tolerance: must be greater than 0"),
    ("cluster", ["worker", "h:1", "--gpus", "x"], "argument --gpus: GPU list must be"),
])
def test_one_error_line_with_one_wording(tool, argv, text, capsys):
    with pytest.raises(SystemExit) as e:
        TOOLS[tool]().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == f"shadertune.{tool}: error: {err.split(': error: ', 1)[1]}"
    assert text in err and err.count("\n") == 1, err
