#!/bin/bash
# Session 24 call C (x4): compiles ahead measured against cold driver compiles. Calls A/B
# and session 23 ran 'ahead on' after 'ahead off' had filled NVIDIA's own shader disk
# cache with most of the same programs; here that cache is off (__GL_SHADER_DISK_CACHE=0)
# for every run: ahead off, ahead on (traced: each compile's end, each build's wait), and
# a rerun on the program cache the 'on' run filled.
set -u
O=$OUT/c; mkdir -p $O
export __GL_SHADER_DISK_CACHE=0
one() {   # name, cache, then env assignments
  local name=$1 cache=$2; shift 2
  env "$@" SHADERTUNE_CACHE=$O/cache-$cache /usr/bin/time -f "wall %e s user %U s sys %S s" \
    timeout 150 python3 tools/trace_gl_ahead.py --backend gl --sizes 1024 --budget 80 -q \
    --db $O/$name.sqlite --report $O/$name.json > $O/$name.txt 2> $O/$name.err
  echo "$name rc=$? $(tail -n1 $O/$name.err)"
}
one c0 c0 SHADERTUNE_GL_COMPILE_AHEAD=0
one c1 c1
one c1r c1
python3 tools/report_stages.py $O/c0.json $O/c1.json $O/c1r.json
grep "trace" $O/c1.err | head -40 | cut -c1-120
xz -T0 $O/*.sqlite 2>/dev/null; rm -rf $O/cache*
cd $OUT && tar czf c.tgz c && rm -rf c
