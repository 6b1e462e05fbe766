# llvmpipe, 2026-11-23, after merging main (image path): the learned model's data, held-out picks and first use
python -m shadertune.perfmodel sample --backend gl --db T.sqlite --problems 60 --configs 16 --min-size 16 --max-size 256 --time-limit 420 --seed 0 > sample.log
scripts/model-quality heldout --backend gl --train-db T.sqlite --out h --tune-time 60 --json heldout-run1.json   # run twice: run1, run2
scripts/model-quality first-use --backend gl --train-db T.sqlite --out fu --shape 300x300x300 --k 8 --seconds 20 --calls 30
