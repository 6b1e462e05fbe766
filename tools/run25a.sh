#!/bin/bash
# Session 25 call A (x4), prepared in session 24 (notes/gpu-session-24.md, "Next"):
# 1) the per-family heat rule against the fixed 0.2 s, GL 1024 searches in one run (the
#    fragment evaluations' compile_ms and their best times); 2) the link's cost against the
#    driver's compile threads (tools/probe_gl_parallel.py); 3) a 4-worker CUDA search under
#    py-spy (where CUDA's workers idle).
set -u
O=$OUT/a; mkdir -p $O
source "$(dirname "$0")/gl_search_run.sh"
one heat-rule __GL_SHADER_DISK_CACHE=0
one heat-fixed __GL_SHADER_DISK_CACHE=0 TRACE_FIXED_HEAT=0.2
python3 tools/report_stages.py $O/heat-rule.json $O/heat-fixed.json
python3 - $O <<'PY'
import json, sys
for n in ("heat-rule", "heat-fixed"):
    rs = json.load(open(f"{sys.argv[1]}/{n}.json"))["problems"][0]["results"]
    frag = [r for r in rs if r["config"].get("family") == "fragment"]
    print(n, "fragment compile_ms", [round(r["compile_ms"] or 0) for r in frag])
    print(n, "fragment best ms", min((r["median_ms"] for r in frag if r["median_ms"]), default=None))
PY
timeout 120 python3 tools/probe_gl_parallel.py $O/probe --configs 12 --threads max,16,4,1 2>&1 | grep -v "^parallel\|^sequential" | tail -12
python3 -m pip install -q --no-deps --target /tmp/site2 .whl-dask/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site2:${PYTHONPATH:-}
timeout 120 /tmp/site/bin/py-spy record --subprocesses --idle --threads -r 50 -f raw -o $O/spy-cu4.txt -- \
  python3 -m shadertune.search --backend cuda --sizes 2048 --budget 256 --workers 4 --db $O/cu4.sqlite --report $O/cu4.json -q > $O/cu4.txt 2>&1
echo "cuda spy rc=$?"; tail -3 $O/cu4.txt
xz -T0 $O/*.sqlite $O/spy-*.txt 2>/dev/null
cd $OUT && tar czf a.tgz a && rm -rf a
