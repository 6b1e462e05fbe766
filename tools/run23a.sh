#!/bin/bash
# Session 23 call A (x4): GL compile probe; GL and CUDA searches on 1 and 4 workers with
# their reports (stage seconds an evaluation); the 4-worker ones under py-spy.
set -u
O=$OUT/a; mkdir -p $O
SPY="/tmp/site/bin/py-spy record --subprocesses --idle --threads -r 50 -f raw"
timeout 150 python3 tools/probe_gl_compile.py $O/pc --configs 24 --procs 4 > $O/pc.txt 2>&1; echo "probe rc=$?"; cat $O/pc.txt
for w in 1 4; do
  /usr/bin/time -f "wall %e s user %U s" timeout 120 python3 -m shadertune.search --backend gl --sizes 1024 --budget 80 --workers $w --db $O/gl$w.sqlite --report $O/gl$w.json -q > $O/gl$w.txt 2>&1; echo "gl w=$w rc=$?"; tail -1 $O/gl$w.txt
done
timeout 100 $SPY -o $O/spy-gl4.txt -- python3 -m shadertune.search --backend gl --sizes 1024 --budget 80 --workers 4 --db $O/gl4b.sqlite --report $O/gl4b.json -q > $O/gl4b.txt 2>&1; echo "gl spy rc=$?"
python3 tools/report_stages.py $O/gl1.json $O/gl4.json $O/gl4b.json
for w in 4 1; do
  /usr/bin/time -f "wall %e s user %U s" timeout 150 python3 -m shadertune.search --backend cuda --sizes 2048,1536,2560,3072 --budget 256 --workers $w --db $O/cu$w.sqlite --report $O/cu$w.json -q > $O/cu$w.txt 2>&1; echo "cuda w=$w rc=$?"; tail -1 $O/cu$w.txt
done
timeout 120 $SPY -o $O/spy-cu4.txt -- python3 -m shadertune.search --backend cuda --sizes 2048,1536,2560,3072 --budget 256 --workers 4 --db $O/cu4b.sqlite --report $O/cu4b.json -q > $O/cu4b.txt 2>&1; echo "cuda spy rc=$?"
python3 tools/report_stages.py $O/cu4.json $O/cu1.json $O/cu4b.json
xz -T0 $O/*.sqlite $O/spy-*.txt 2>/dev/null
cd $OUT && tar czf a.tgz a && rm -rf a
