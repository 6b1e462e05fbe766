import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    for p in d.get("problems", []):
        st = p.get("stage_seconds") or {}
        n = p.get("measured") or p.get("evaluated") or 1
        print(f, p.get("problem"), "measured", n, {k: round(v / n * 1e3, 1) for k, v in st.items()}, "ms/eval")
