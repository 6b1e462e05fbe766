#!/bin/bash
# Session 24 call B (x4), after the verification's squared error left BLAS (np.einsum):
# the GL 1024 search of call A (threads, user time) and bench-workers on 1, 2 and 4 GPUs.
# BACKEND=gl|cuda, BW_MIN, BW_S; NAME names the output folder.
set -u
NAME=${NAME:-b}; BACKEND=${BACKEND:-gl}; BW_MIN=${BW_MIN:-3.8}; BW_S=${BW_S:-250}
O=$OUT/$NAME; mkdir -p $O
if [ "$BACKEND" = gl ]; then
  SHADERTUNE_CACHE=$O/cache-s /usr/bin/time -f "wall %e s user %U s sys %S s" timeout 100 \
    python3 -m shadertune.search --backend gl --sizes 1024 --budget 80 -q --db $O/s.sqlite --report $O/s.json > $O/s.txt 2> $O/s.err &
  t=$!; sleep 12
  python3 tools/thread_cpu.py $(pgrep -f "^python3 -m shadertune.search.*s.sqlite" | head -1) 4 > $O/s.threads 2>&1
  wait $t; echo "search rc=$? $(tail -n1 $O/s.err)"; head -3 $O/s.threads
  python3 tools/report_stages.py $O/s.json
fi
python3 -m pip install -q --no-deps --target /tmp/site2 .whl-dask/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site2:${PYTHONPATH:-}
EXTRA=""; [ "$BACKEND" = cuda ] && EXTRA="--cuda-budget 256"; [ "$BACKEND" = gl ] && EXTRA="--gl-budget 40"
timeout $BW_S scripts/bench-workers $O/bw --backends $BACKEND --gpus 0,1,2,3 --counts 1,2,4 $EXTRA --minutes $BW_MIN > $O/bw.txt 2>&1; echo "bw rc=$?"; grep -A8 '^| backend' $O/bw.txt
xz -T0 $O/*.sqlite 2>/dev/null; rm -rf $O/cache*
cd $OUT && tar czf $NAME.tgz $NAME && rm -rf $NAME
