#!/bin/bash
# Session 24 call F (x4): compiles ahead on the driver's threads (compile_ahead.py) measured.
# With NVIDIA's shader disk cache off (every compile cold): ahead off / on, traced; with
# it on, in a fresh folder (a user's first search): ahead on; then bench-workers GL on 1, 2
# and 4 GPUs with the disk cache off (no run profits from another's compiles).
# Call H: NAME=h, after the link threads (link_threads.py).
set -u
NAME=${NAME:-f}; O=$OUT/$NAME; mkdir -p $O
source "$(dirname "$0")/gl_search_run.sh"
one f0 __GL_SHADER_DISK_CACHE=0 SHADERTUNE_GL_COMPILE_AHEAD=0
one f1 __GL_SHADER_DISK_CACHE=0
mkdir -p /tmp/nvc; one g1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc
python3 tools/report_stages.py $O/f0.json $O/f1.json $O/g1.json
grep "trace" $O/f1.err | sort | uniq -c | sort -rn | head -12
python3 -m pip install -q --no-deps --target /tmp/site2 .whl-dask/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site2:${PYTHONPATH:-}
__GL_SHADER_DISK_CACHE=0 timeout 260 scripts/bench-workers $O/bw --backends gl --gpus 0,1,2,3 --counts 1,2,4 --gl-budget 40 --minutes 3.9 > $O/bw.txt 2>&1; echo "bw rc=$?"; grep -A8 '^| backend' $O/bw.txt
xz -T0 $O/*.sqlite 2>/dev/null
cd $OUT && tar czf $NAME.tgz $NAME && rm -rf $NAME
