# Sourced by the session run scripts: one GL 1024^3 search of 80 evaluations, traced
# (tools/trace_gl_ahead.py), into $O/NAME.{sqlite,json,txt,err}; `one NAME [VAR=value ...]`.
one() {
  local name=$1; shift
  env "$@" /usr/bin/time -f "wall %e s user %U s sys %S s" \
    timeout 150 python3 tools/trace_gl_ahead.py --backend gl --sizes 1024 --budget 80 -q \
    --db $O/$name.sqlite --report $O/$name.json > $O/$name.txt 2> $O/$name.err
  echo "$name rc=$? $(tail -n1 $O/$name.err)"
}
