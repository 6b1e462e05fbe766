"""`python -m shadertune.search ARGS` with each GL build's wait for its compile ahead
traced on stderr (the future's answer, how long it waited, whether the binary is there)
and each compile_ahead call (how many sources, whether the pool existed): why a search
compiles in its own thread although a pool was asked to compile ahead (session 24)."""
import sys
import time

from shadertune.backends.gl.platform import program_cache as pc

_wait, _ahead = pc._wait_ahead, pc.compile_ahead


def wait(path):
    fut, t = pc._ahead.get(path), time.perf_counter()
    _wait(path)
    if fut is None:
        print(f"trace nofuture {path.name[:8]} cached={path.exists()}", file=sys.stderr)
        return
    try:
        res = fut.result(timeout=0)
    except BaseException as e:          # noqa: BLE001 - traced
        res = repr(e)
    print(f"trace wait {path.name[:8]} {1e3 * (time.perf_counter() - t):.0f} ms -> {res!r} "
          f"cached={path.exists()}", file=sys.stderr)


_seen = set()


def ahead(sources, tag, device_index):
    sources = list(sources)
    print(f"trace compile_ahead {len(sources)} sources pool={pc._ahead_pool is not None}", file=sys.stderr)
    t0 = time.perf_counter()
    out = _ahead(sources, tag, device_index)
    for path, fut in list(pc._ahead.items()):      # each new compile: when it ended
        if path not in _seen:
            _seen.add(path)
            fut.add_done_callback(lambda f, p=path, t=t0: print(
                f"trace done {p.name[:8]} {1e3 * (time.perf_counter() - t):.0f} ms after its call",
                file=sys.stderr))
    return out


pc._wait_ahead, pc.compile_ahead = wait, ahead

if __name__ == "__main__":
    from shadertune.cli.search import main
    sys.argv[0] = "shadertune.search"
    sys.exit(main())
