# Sourced by scripts/demo and scripts/test: make a fresh Debian machine ready.
#  - Mesa EGL (llvmpipe) and Xvfb from Debian when missing and we are root,
#  - a virtual environment in .venv with shadertune (editable) and its extras.
# Afterwards $PY is the venv's python.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
EXTRAS=${SHADERTUNE_EXTRAS:-test}

need_debs=()
have_lib() { ldconfig -p 2>/dev/null | grep -q "$1"; }
have_lib 'libEGL.so.1 '      || need_debs+=(libegl1)
have_lib 'libEGL_mesa.so.0 ' || need_debs+=(libegl-mesa0)
have_lib 'libGL.so.1 '       || need_debs+=(libgl1)
have_lib 'libGLX_mesa.so.0 ' || need_debs+=(libglx-mesa0)
ls /usr/lib/*/dri/swrast_dri.so >/dev/null 2>&1 || need_debs+=(libgl1-mesa-dri)
if [ "$EXTRAS" = test ] && ! command -v Xvfb >/dev/null; then need_debs+=(xvfb); fi
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then need_debs+=(python3-venv); fi
if [ ${#need_debs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing ${need_debs[*]} (Debian packages)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need_debs[@]}" >/dev/null
  else
    echo "bootstrap: missing ${need_debs[*]}; install them (apt-get install ${need_debs[*]}) or run as root" >&2
  fi
fi

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "bootstrap: shadertune needs Python 3.11 or newer, found $(python3 --version)" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
PY="$ROOT/.venv/bin/python"
# Reinstall only when the project's metadata changed.
stamp=".venv/.shadertune-$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)-$EXTRAS"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing shadertune[$EXTRAS] into .venv" >&2
  "$PY" -m pip install -q --disable-pip-version-check --upgrade pip setuptools wheel >/dev/null
  "$PY" -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
  rm -f .venv/.shadertune-*
  touch "$stamp"
fi
export PY
