"""CPU time of one process's threads over an interval, by thread name (/proc):
python3 tools/thread_cpu.py PID [SECONDS] -> tid, name, % of one core, sorted.
Answers which threads of a search burn the host's cores (session 24)."""
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def sample(pid: int) -> dict:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        out[int(tid)] = (name, int(fields[11]) + int(fields[12]))   # utime + stime
    return out


def main() -> None:
    pid, secs = int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    a = sample(pid)
    time.sleep(secs)
    b = sample(pid)
    rows = sorted(((b[t][1] - a.get(t, (None, 0))[1]) / TICK / secs * 100, t, b[t][0]) for t in b)
    total = sum(r[0] for r in rows)
    print(f"pid {pid}: {len(rows)} threads, {total:.0f}% of one core over {secs:.1f} s")
    by_name = {}
    for pct, _, name in rows:
        by_name[name] = by_name.get(name, 0.0) + pct
    for name, pct in sorted(by_name.items(), key=lambda x: -x[1]):
        print(f"  {name:20s} {pct:7.0f}%  ({sum(1 for r in rows if r[2] == name)} threads)")
    for pct, tid, name in rows[::-1][:24]:
        print(f"  tid {tid:7d} {name:20s} {pct:6.0f}%")


if __name__ == "__main__":
    main()
