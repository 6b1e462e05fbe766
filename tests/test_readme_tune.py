"""The README's tuning example, run as written on the GL backend (llvmpipe here), in a
folder of its own: shadertune.tune stores a verified config and matmul's auto runs it."""
import pathlib
import re

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent


def readme_block(marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    (block,) = [b for b in blocks if marker in b]
    return block


def test_the_readme_tune_example_runs(gl, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(readme_block("shadertune.tune("), "README.md", "exec"), scope)
    r, A, B, C = scope["r"], scope["A"], scope["B"], scope["C"]
    assert r.config is not None and r.gflops > 0 and r.ms > 0 and r.error <= 1e-5
    assert r.entry["evaluated"] == r.evaluated <= 12 and r.entry["best"]["config"] == r.config.to_dict()
    assert (tmp_path / "tune.sqlite").exists() and r.store == pathlib.Path("tune.sqlite")
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    out = capsys.readouterr().out
    assert "64x48x32 float32 on gl" in out and "config (exact)" in out
