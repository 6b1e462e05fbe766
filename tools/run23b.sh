#!/bin/bash
# Session 23 calls B and C (x4): GL compile ahead into the program-binary cache, measured.
# Call B ran it as is; call C (after the heater fix) as tools/run23c.sh: NAME=c, shorter
# time limits for the phased tune and bench-workers.
# 1) one GPU, 1024^3, 80 evaluations: ahead off / on, each on a fresh cache; then the
#    same search again on the cache the 'on' run filled (a rerun); 2) the complete phased
#    tune at 4096 with ahead on (issue 39: <= 3 minutes); 3) bench-workers GL 1/2/4.
set -u
NAME=${NAME:-b}; PHASED_S=${PHASED_S:-200}; BW_S=${BW_S:-280}; BW_MIN=${BW_MIN:-4.5}
O=$OUT/$NAME; mkdir -p $O
for mode in 0 1; do
  SHADERTUNE_CACHE=$O/cache$mode SHADERTUNE_GL_COMPILE_AHEAD=$mode /usr/bin/time -f "wall %e s user %U s" timeout 120 python3 -m shadertune.search --backend gl --sizes 1024 --budget 80 --db $O/gl-ahead$mode.sqlite --report $O/gl-ahead$mode.json -q > $O/gl-ahead$mode.txt 2>&1; echo "ahead=$mode rc=$?"; tail -1 $O/gl-ahead$mode.txt
done
SHADERTUNE_CACHE=$O/cache1 /usr/bin/time -f "wall %e s user %U s" timeout 120 python3 -m shadertune.search --backend gl --sizes 1024 --budget 80 --db $O/gl-rerun.sqlite --report $O/gl-rerun.json -q > $O/gl-rerun.txt 2>&1; echo "rerun rc=$?"; tail -1 $O/gl-rerun.txt
python3 tools/report_stages.py $O/gl-ahead0.json $O/gl-ahead1.json $O/gl-rerun.json
grep -h "1024x1024x1024" $O/gl-ahead0.txt $O/gl-ahead1.txt $O/gl-rerun.txt | cut -c1-40,150-260
SHADERTUNE_CACHE=$O/cache4096 /usr/bin/time -f "wall %e s user %U s" timeout $PHASED_S python3 -m shadertune.search --backend gl --sizes 4096 --fix family=compute --db $O/p4096.sqlite --report $O/p4096.json -q > $O/p4096.txt 2>&1; echo "phased 4096 rc=$?"; cat $O/p4096.txt | cut -c1-30,150-300
python3 tools/report_stages.py $O/p4096.json
timeout $BW_S scripts/bench-workers $O/bw --backends gl --gpus 0,1,2,3 --counts 1,2,4 --gl-budget 40 --minutes $BW_MIN > $O/bw.txt 2>&1; echo "bw rc=$?"; grep -A8 '^| backend' $O/bw.txt
xz -T0 $O/*.sqlite 2>/dev/null; rm -rf $O/cache*
cd $OUT && tar czf $NAME.tgz $NAME && rm -rf $NAME
