# llvmpipe (Mesa 22.3.6, 2 shared cores), 2026-11-23, s9: learned model's data and held-out picks under today's code (guard in place), run from /work/main
D=benchmarks/llvmpipe-2026-11-23-s9-perfmodel
mkdir -p $D
.venv/bin/python -m shadertune.perfmodel sample --backend gl --db $D/T.sqlite --problems 60 --configs 16 --min-size 16 --max-size 256 --time-limit 420 --seed 0 > $D/sample.log 2>&1
(time scripts/model-quality heldout --backend gl --train-db $D/T.sqlite --out $D/h --tune-time 60 --json $D/heldout.json) > $D/heldout.log 2>&1   # `time` only adds real/user/sys to the log
# afterwards: rm -r $D/T.sqlite.models (the saved model, 4.8 MB, retrained from T.sqlite on first use)
