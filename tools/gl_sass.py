"""The driver's machine code of given GL compute configs (a device-session probe).

    python3 tools/gl_sass.py OUT MxNxK CONFIG_JSON [CONFIG_JSON ...]

Writes OUT/sass.txt (nvdisasm's text per config) and OUT/sass.json (per config: highest
register, instruction mix, FFMA per shared-memory load; scripts/gl_probes.summary)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
sys.path.insert(0, os.path.join(HERE, ".."))

import gl_probes  # noqa: E402
from shadertune.core.atomic import write_text  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402


def main(argv) -> int:
    out, shape, *configs = argv
    M, N, K = map(int, shape.split("x"))
    os.makedirs(out, exist_ok=True)
    rows, text = gl_probes.sass_of_configs(Problem(M, N, K), [Config(json.loads(c)) for c in configs],
                                           os.path.join(os.path.abspath(out), "glcache"))
    write_text(os.path.join(out, "sass.txt"), text or "no program in the driver's disk cache\n")
    write_text(os.path.join(out, "sass.json"), json.dumps(rows, indent=1))
    for r in rows:
        print(json.dumps({"programs": r["programs"], "failure": r.get("failure")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
