"""Every command line the README and docs/ show is one its tool takes today, and every script
they name answers --help.

- Each `python -m shadertune.TOOL ...` of README.md and docs/*.md (fenced and indented
  blocks, and inline ones that give an option) is parsed by its tool's own parser, its
  optional parts ([--x]) included: a flag that was renamed or removed fails here.  codegen's
  knobs (--mc 1x4, --BM 128) are checked by codegen itself against the backend's space.
  Running them to completion at a small size is the other tests' job (test_search_cli,
  test_db_cli, test_report*, test_codegen_cli, test_perfmodel*, test_cluster*).
- Each extensionless script launcher under scripts/ answers --help with a usage, exit 0,
  and makes nothing (scripts/probe-gl-clock once took "--help" for its output folder and
  timed a 4096^3 product on llvmpipe).
- The CUDA benchmark scripts say in one line, without a traceback, that CuPy or a GPU is
  missing.
- scripts/demo reads a relative --db in the folder it was started from (bootstrap.sh
  changes to the checkout).
"""
from __future__ import annotations

import importlib
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from subproc import child_env, run_python

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# placeholders of the pages' syntax lines, as a user would fill them in
PLACEHOLDERS = {"B,M,N,K": "2,8,8,8", "MxNxK": "8x8x8", "'{...}'": "'{}'", "REPORT...": "REPORT",
                "--rejoin S": "--rejoin 30"}


def _shell_lines(text: str):
    """The lines of fenced blocks (not python) and indented blocks, continuation lines
    joined, shell variables (R=..., $R) substituted."""
    fenced = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
    blocks = [b for lang, b in fenced if lang != "python"]
    rest = re.sub(r"```.*?```", "", text, flags=re.S)
    blocks.append("\n".join(line[4:] for line in rest.splitlines() if line.startswith("    ")))
    for block in blocks:
        env: dict[str, str] = {}
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if re.fullmatch(r'(\w+=("[^"]*"|\S+);?\s*)+', line):
                env.update(re.findall(r'(\w+)="?([^";]*)"?;?', line))
                continue
            for k, v in env.items():
                line = line.replace("$" + k, v)
            yield line


def documented() -> list[tuple[str, str]]:
    """(page, command) for each `python -m shadertune.TOOL` command with an option."""
    found = []
    for page in PAGES:
        text = page.read_text()
        inline = re.findall(r"`(python -m shadertune[^`]*)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for line in [*_shell_lines(text), *inline]:
            line = " ".join(line.split("  #")[0].split())
            for part in line.split(" | "):
                part = re.sub(r"^(\w+=\S+\s+)+", "", part.strip()).split(" > ")[0]
                if re.match(r"python -m shadertune\.\w+ ", part) and \
                        any(w.startswith("-") for w in part.split()[3:]):
                    found.append((page.name, part))
    return sorted(set(found))


def _argv(command: str) -> tuple[str, list[str]]:
    for k, v in PLACEHOLDERS.items():
        command = command.replace(k, v)
    words = shlex.split(command.replace("[", " ").replace("]", " ").replace("...", " "))
    tool = words[2].removeprefix("shadertune.")
    return tool, [w.split("|")[0] if "|" in w and not w.startswith("-") else w for w in words[3:]]


COMMANDS = documented()


def test_the_pages_show_commands_of_every_tool():
    tools = {_argv(c)[0] for _, c in COMMANDS}
    assert {"search", "report", "db", "codegen", "perfmodel", "cluster"} <= tools, tools


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}:{c[20:60]}" for p, c in COMMANDS])
def test_a_documented_command_is_one_its_tool_takes(page, command, gl, capsys):
    tool, argv = _argv(command)
    if tool == "codegen":
        # its knobs come from the backend's space: codegen itself checks them (listing
        # the whole space at 1024 is the same check, and slow)
        from shadertune.cli.codegen import main
        argv = ["--list-knobs" if a == "--list-space" else a for a in argv]
        if "--backend" in argv and argv[argv.index("--backend") + 1] not in ("gl", "cuda"):
            pytest.skip(f"{command}: a placeholder backend")
        code = main(argv)
        assert code == 0, f"{page}: {command}: {capsys.readouterr().err}"
        return
    parser = importlib.import_module(f"shadertune.cli.{tool}").build_parser()
    try:
        parser.parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{page}: {command}: {capsys.readouterr().err.strip()} (exit {e.code})")


# (files only: a run of the scripts with bytecode on leaves scripts/__pycache__ there)
LAUNCHERS = sorted(p for p in (ROOT / "scripts").iterdir()
                   if p.is_file() and "." not in p.name
                   and p.read_text().startswith("#!/usr/bin/env python3"))

HELP_ALL = """
import contextlib, io, os, runpy, sys
for path in sys.argv[1:]:
    sys.argv, buf, code = [path, "--help"], io.StringIO(), "returned"
    with contextlib.redirect_stdout(buf):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            code = e.code
    print(os.path.basename(path), code, "usage:" in buf.getvalue(), flush=True)
"""


def test_every_script_answers_help_and_makes_nothing(tmp_path):
    """One child runs every launcher's --help in turn (the imports are paid once)."""
    r = run_python(HELP_ALL, *LAUNCHERS, cwd=tmp_path, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.split("\n")
    answers = {w[0]: (w[1], w[2]) for w in (line.split() for line in lines) if len(w) == 3}
    assert answers == {p.name: ("0", "True") for p in LAUNCHERS}, r.stdout + r.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


def _no_cupy():
    try:
        import cupy  # noqa: F401
    except ImportError:
        return True
    return False


@pytest.mark.skipif(not _no_cupy(), reason="CuPy is installed here: the scripts would run")
@pytest.mark.parametrize("script, argv", [("bench-cuda", ["--quick"]), ("bench-cuda-call", []),
                                          ("bench-shape-classes", ["--classes", "skinny"])])
def test_a_cuda_script_without_cupy_says_so_in_one_line(script, argv, tmp_path):
    r = run_python(None, ROOT / "scripts" / script, "--out", tmp_path / "out", *argv, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.startswith(f"{script}: error: ") and "CuPy" in r.stderr
    assert r.stderr.count("\n") == 1


@pytest.mark.skipif(pathlib.Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
                    reason="scripts/demo bootstraps .venv: only where the tests run in it")
def test_scripts_demo_reads_a_relative_store_where_it_was_started(tmp_path, gl):
    """A store that is no store, named relative to the caller's folder: the demo refuses it
    in one line (exit 1).  Read from the checkout instead, the name was a fresh store there
    and the demo tuned into it."""
    name = f"not-a-store-{os.getpid()}.sqlite"
    (tmp_path / name).write_bytes(b"junk" * 1000)
    try:
        r = subprocess.run(["bash", str(ROOT / "scripts" / "demo"), "--sizes", "16", "--budget", "1",
                            "--db", name], cwd=tmp_path, env=child_env(), capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"{name} is not a usable shadertune store" in r.stderr
        assert r.stderr.strip().count("\n") == 0
    finally:
        stray = ROOT / name
        made = stray.exists()
        for p in ROOT.glob(name + "*"):          # the store, its -wal, -shm, .models
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        assert not made, "scripts/demo made its store in the checkout"


def test_bench_gpu_says_when_its_gl_stages_would_run_on_a_software_renderer():
    # llvmpipe here: the whole GPU benchmark would run for hours and measure the host's
    # cores; it says so in one line at the start (and says nothing once GL is skipped)
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        bench_gpu = importlib.import_module("bench_gpu")
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from shadertune.backends.gl import GLBackend
    if not GLBackend().device().limits.get("software_renderer"):
        pytest.skip("a hardware GL renderer")
    line = bench_gpu.software_warning(set())
    assert line.startswith("bench-gpu: GL runs on a software renderer (llvmpipe")
    assert bench_gpu.software_warning(set(bench_gpu.GL_STAGES)) is None
