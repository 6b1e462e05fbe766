#!/bin/bash
# Session 24 call A (x4): who burns ~21 cores of a GL search (threads by name, py-spy
# --native dump), does one BLAS thread change it, and why a rerun on a filled program
# cache compiled in its own thread (each build's wait for its compile ahead, traced).
set -u
O=$OUT/a; mkdir -p $O
python3 -m threadpoolctl -i numpy > $O/threadpoolctl.txt 2>&1
nproc > $O/nproc.txt; nvidia-smi -L >> $O/nproc.txt
one() {   # name, then env assignments
  local name=$1; shift
  env "$@" SHADERTUNE_CACHE=$O/cache-${CACHE:-$name} /usr/bin/time -f "wall %e s user %U s sys %S s" \
    timeout 150 python3 tools/trace_gl_ahead.py --backend gl --sizes 1024 --budget 80 -q \
    --db $O/$name.sqlite --report $O/$name.json > $O/$name.txt 2> $O/$name.err &
  local t=$!
  sleep 12
  local pid=$(pgrep -f "^python3 tools/trace_gl_ahead.py.*$name.sqlite" | head -1)
  python3 tools/thread_cpu.py $pid 4 > $O/$name.threads 2>&1
  [ -n "${DUMP:-}" ] && timeout 30 /tmp/site/bin/py-spy dump --native --pid $pid > $O/$name.dump 2>&1
  wait $t; echo "$name rc=$? $(tail -n1 $O/$name.err)"; head -4 $O/$name.threads
}
DUMP=1 one a0 SHADERTUNE_GL_COMPILE_AHEAD=0
one a0blas1 SHADERTUNE_GL_COMPILE_AHEAD=0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
one a1 SHADERTUNE_GL_COMPILE_AHEAD=1
CACHE=a1 one r1 SHADERTUNE_GL_COMPILE_AHEAD=1
python3 tools/report_stages.py $O/a0.json $O/a0blas1.json $O/a1.json $O/r1.json
grep -c "trace wait" $O/a1.err $O/r1.err; grep "trace" $O/r1.err | cut -c1-150 | sort | uniq -c | sort -rn | head -8
xz -T0 $O/*.sqlite 2>/dev/null; rm -rf $O/cache*
cd $OUT && tar czf a.tgz a && rm -rf a
