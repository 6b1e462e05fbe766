"""Search progress on a real pseudo-terminal (os.openpty, its size set with TIOCSWINSZ):
the bar keeps its width while the phase text beside it changes, every line fits the
terminal, and a terminal that reports no width gets periodic lines instead."""
import fcntl
import os
import re
import select
import struct
import termios

import pytest
from fake_backend import FakeBackend, best_correct

from shadertune.core.problem import Problem
from shadertune.search import Evaluator
from shadertune.search.progress import BAR_WIDTH, Progress


@pytest.fixture
def terminal():
    """(writer, read): a pseudo-terminal of a given size, and what was written to it."""
    opened = []

    def make(columns: int, rows: int = 24):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        writer = os.fdopen(slave, "w", buffering=1)
        opened.append((master, writer))

        def read() -> str:
            writer.flush()
            chunks = []
            while select.select([master], [], [], 0.2)[0]:
                chunks.append(os.read(master, 65536))
            return b"".join(chunks).decode("utf-8", "replace")
        return writer, read
    yield make
    for master, writer in opened:
        writer.close()
        os.close(master)


def _result():
    be = FakeBackend()
    return Evaluator(be, Problem(8, 8, 64), repeats=1, warmup=0)(best_correct(be.space(Problem(8, 8, 64))))


def test_the_bar_keeps_its_width_while_the_phase_text_changes(terminal):
    stream, read = terminal(140)
    r = _result()
    bar = Progress("64x64x64", index=1, count=2, total=8, stream=stream)
    assert bar.mode == "bar"
    long = "glsl=450 fetch=texelFetch unroll=4 and a label longer than the terminal " * 2
    for phase in ("np", long, "mc", "refine np around 32"):
        bar.phase(phase)
        bar.update(r)
    bar.close()
    # each redraw starts at the line's start ('\r'); the bar is between the first two '|'
    draws = [d for d in re.split(r"[\r\n]+", read()) if "|" in d]
    assert len(draws) >= 4
    bars = [re.search(r"\|([^|]*)\|", d).group(1) for d in draws]
    assert {len(b) for b in bars} == {BAR_WIDTH}, bars
    assert max(len(d) for d in draws) <= 140            # every line fits: the long label is cut
    assert any("glsl=450 fetch=texelFetch" in d for d in draws) and not any(long in d for d in draws)
    assert any("refine np around 32" in d for d in draws)


def test_a_terminal_without_a_width_gets_lines(terminal):
    stream, read = terminal(0)
    bar = Progress("64x64x64", total=8, stream=stream, interval=0.0)
    assert bar.mode == "lines"
    bar.phase("np")
    bar.update(_result())
    bar.close()
    lines = [x for x in read().splitlines() if x]
    assert lines[0] == "shadertune.search: 64x64x64: searching (budget 8 evaluations)"
    assert lines[1].startswith("shadertune.search: 64x64x64: 1/8 evaluations") and "phase np" in lines[1]
    assert lines[-1].startswith("shadertune.search: 64x64x64: done: 1 evaluations")
