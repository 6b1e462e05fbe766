# Sourced by scripts/demo and scripts/test: make a fresh Debian machine ready.
#  - Mesa EGL (llvmpipe) from Debian when missing and we are root (and Xvfb for the tests'
#    GLFW check only), waiting for another apt or dpkg to finish rather than failing,
#  - a virtual environment in .venv with shadertune (editable) and the extras its caller
#    needs: none for the demo (BOOTSTRAP_FOR=demo), `test` for the tests; SHADERTUNE_EXTRAS
#    (comma-separated, e.g. test,cuda) overrides the choice.
# A venv made for the tests serves the demo as it is; one made for the demo gets only the
# tests' extra requirements added. Afterwards $PY is the venv's python, the working folder
# the repository root, and $CALLER_DIR the folder the caller ran the script from (where the
# user's relative paths point).
set -euo pipefail
CALLER_DIR=$PWD
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BOOTSTRAP_FOR=${BOOTSTRAP_FOR:-test}
if [ "$BOOTSTRAP_FOR" = demo ]; then EXTRAS=${SHADERTUNE_EXTRAS-}; else EXTRAS=${SHADERTUNE_EXTRAS-test}; fi

need_debs=()
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_lib 'libEGL.so.1 '      || need_debs+=(libegl1)
have_lib 'libEGL_mesa.so.0 ' || need_debs+=(libegl-mesa0)
have_lib 'libGL.so.1 '       || need_debs+=(libgl1)
have_lib 'libGLX_mesa.so.0 ' || need_debs+=(libglx-mesa0)
ls /usr/lib/*/dri/swrast_dri.so >/dev/null 2>&1 || need_debs+=(libgl1-mesa-dri)
# Xvfb serves one test (a GLFW window on a virtual display), never the demo
if [ "$BOOTSTRAP_FOR" = test ] && ! command -v Xvfb >/dev/null; then need_debs+=(xvfb); fi
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then need_debs+=(python3-venv); fi

# apt-get that waits up to 5 minutes for a lock another apt or dpkg holds (unattended
# upgrades on a fresh machine): DPkg::Lock::Timeout covers dpkg's locks; the loop covers
# the package lists' lock of `apt-get update`, which that option does not wait for.
apt_wait() {
  local tries=60 err
  err=$(mktemp)
  while true; do
    if apt-get -o DPkg::Lock::Timeout=300 "$@" >/dev/null 2>"$err"; then rm -f "$err"; return 0; fi
    if grep -qi 'could not get lock\|unable to lock\|is another process using it' "$err" \
        && [ $((tries -= 1)) -gt 0 ]; then
      [ "$tries" = 59 ] && echo "bootstrap: waiting for another apt/dpkg to release its lock" >&2
      sleep 5
      continue
    fi
    cat "$err" >&2; rm -f "$err"; return 1
  done
}

if [ ${#need_debs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing ${need_debs[*]} (Debian packages)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt_wait update -qq
    apt_wait install -y -qq --no-install-recommends "${need_debs[@]}"
  else
    echo "bootstrap: missing ${need_debs[*]}; install them (apt-get install ${need_debs[*]}) or run as root" >&2
  fi
fi

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "bootstrap: shadertune needs Python 3.11 or newer, found $(python3 --version)" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
PY="$ROOT/.venv/bin/python"
pipq() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }

# Stamps: .venv/.shadertune-HASH-base marks the editable install of this metadata (HASH:
# pyproject.toml and setup.py), .venv/.shadertune-HASH-EXTRA each extra installed on top.
# A change of metadata reinstalls; an extra not yet there installs its requirements alone.
hash=$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)
stamp=".venv/.shadertune-$hash"
if [ ! -f "$stamp-base" ]; then
  echo "bootstrap: installing shadertune${EXTRAS:+[$EXTRAS]} into .venv" >&2
  pipq -e ".${EXTRAS:+[$EXTRAS]}"
  rm -f .venv/.shadertune-*
  touch "$stamp-base"
  for extra in ${EXTRAS//,/ }; do touch "$stamp-$extra"; done
else
  missing=()
  for extra in ${EXTRAS//,/ }; do [ -f "$stamp-$extra" ] || missing+=("$extra"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "bootstrap: adding the ${missing[*]} extra(s) to .venv" >&2
    # the extras' requirements as pyproject.toml lists them: shadertune itself stays as installed
    reqs=$("$PY" - "${missing[@]}" <<'EOF'
import sys, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
for name in sys.argv[1:]:
    if name not in extras:
        sys.exit(f"bootstrap: no extra {name!r} in pyproject.toml (there are {', '.join(extras)})")
    print(*extras[name], sep="\n")
EOF
    )
    mapfile -t reqs <<<"$reqs"
    pipq "${reqs[@]}"
    for extra in "${missing[@]}"; do touch "$stamp-$extra"; done
  fi
fi
export PY CALLER_DIR
