#!/usr/bin/env bash
# One idempotent set-up for `make lab`, `make test`, `make demo` and `make bench`.
#
# Each step runs only when its inputs changed: a stamp in .stamps/<step> holds
# the hash of the step's inputs (file contents), and the step is skipped when
# the hash matches and its output is still there. A repeated run takes seconds.
#
# `scripts/setup.sh --check` runs nothing: it lists the steps that would run and
# exits 1 when any would (tests use it to prove a repeated set-up skips them all).
#
# Environment: VENV (default .venv), PYTHON (default python3), TORCH_CPU_PIN
# (default torch==2.13.0, installed first when no GPU is visible).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH_CPU_PIN=${TORCH_CPU_PIN:-torch==2.13.0}
STAMPS=$ROOT/.stamps
PY=$VENV/bin/python
CHECK_ONLY=0
[ "${1:-}" = --check ] && CHECK_ONLY=1
STALE=0
mkdir -p "$STAMPS"

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# hash_of PATH... : one hash over the contents of files (directories walked, sorted).
hash_of() {
    local p
    for p in "$@"; do
        if [ -d "$p" ]; then
            find "$p" -type f -not -path '*/node_modules/*' -print0 | sort -z | xargs -0 -r sha256sum
        elif [ -e "$p" ]; then
            sha256sum "$p"
        else
            echo "absent $p"
        fi
    done | sha256sum | cut -c1-32
}

# step NAME KEY OUTPUT COMMAND... : run COMMAND unless the stamp matches KEY and OUTPUT exists.
step() {
    local name=$1 key=$2 output=$3
    shift 3
    if [ -f "$STAMPS/$name" ] && [ "$(cat "$STAMPS/$name")" = "$key" ] && [ -e "$output" ]; then
        log "$name: up to date"
        return 0
    fi
    if [ "$CHECK_ONLY" = 1 ]; then
        log "$name: would run"
        STALE=1
        return 0
    fi
    log "$name: running"
    local t0=$SECONDS
    "$@"
    echo "$key" >"$STAMPS/$name"
    log "$name: done in $((SECONDS - t0)) s"
}

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else die "need root to run: $* (install it by hand, then rerun)"
    fi
}

# --- system pieces ---------------------------------------------------------------
if [ "$CHECK_ONLY" = 1 ] && [ ! -x "$PY" ]; then
    log "venv: would create $VENV"
    exit 1
fi
if [ ! -x /usr/bin/chromium ] && [ "$CHECK_ONLY" = 1 ]; then
    log "chromium: would install"
    STALE=1
elif [ ! -x /usr/bin/chromium ]; then
    log "chromium: missing, installing Debian's chromium (browser tests drive it)"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null
fi
command -v npm >/dev/null || die "npm not found: install Node.js >= 20.19 (e.g. apt-get install nodejs npm)"

# --- python ----------------------------------------------------------------------
if [ ! -x "$PY" ]; then
    log "venv: creating $VENV with $PYTHON"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
        die "$PYTHON is $("$PYTHON" --version 2>&1); labkit needs Python >= 3.10 (set PYTHON=...)"
    "$PYTHON" -m venv "$VENV"
fi

VENV_BIN=$(cd "$VENV/bin" 2>/dev/null && pwd || echo "$ROOT/$VENV/bin")

python_deps() {
    "$PY" -m pip install -q --upgrade pip
    if ! command -v nvidia-smi >/dev/null; then
        log "no GPU visible: installing the CPU build ($TORCH_CPU_PIN) first"
        "$PY" -m pip install -q "$TORCH_CPU_PIN"
    fi
    "$PY" -m pip install -q -e '.[dev,export]'
}
GPU=$(command -v nvidia-smi >/dev/null && echo gpu || echo cpu)
step python "$(hash_of pyproject.toml)-$GPU-$("$PY" -V 2>&1)" "$VENV/bin/labkit" python_deps

# --- front end: widget bundles -----------------------------------------------------
# dev dependencies included even where NODE_ENV=production: esbuild builds the bundles,
# typescript and biome run in `make lint` (widgets/package.json)
npm_ci() { (cd "$1" && npm ci --include=dev --no-audit --no-fund --loglevel=error); }
step widgets-npm "$(hash_of widgets/package.json widgets/package-lock.json)" \
    widgets/node_modules npm_ci widgets
step widgets-build "$(hash_of widgets/package-lock.json widgets/build.mjs widgets/src)" \
    labkit/views/static/manifest.json bash -c 'cd widgets && npm run -s build'

# --- front end: JupyterLab extension ----------------------------------------------
step extension-npm "$(hash_of extensions/package.json extensions/package-lock.json)" \
    extensions/node_modules npm_ci extensions
build_extension() {
    rm -rf extensions/lib extensions/tsconfig.tsbuildinfo labkit/labextension
    (cd extensions && PATH="$VENV_BIN:$PATH" npm run -s build)
}
step extension-build "$(hash_of extensions/package.json extensions/package-lock.json \
    extensions/tsconfig.json extensions/src extensions/schema "$STAMPS/python")" labkit/labextension/package.json build_extension

if [ "$CHECK_ONLY" = 1 ]; then
    exit "$STALE"
fi

# --- install both extensions into the venv (cheap, always) --------------------------
LABEXT_DIR=$VENV/share/jupyter/labextensions
mkdir -p "$LABEXT_DIR" "$VENV/etc/jupyter/jupyter_server_config.d"
# a copy left by a wheel install would swallow the link: replace it
[ -d "$LABEXT_DIR/labkit" ] && [ ! -L "$LABEXT_DIR/labkit" ] && rm -rf "$LABEXT_DIR/labkit"
ln -sfn "$ROOT/labkit/labextension" "$LABEXT_DIR/labkit"
cp jupyter-config/jupyter_server_config.d/labkit.json "$VENV/etc/jupyter/jupyter_server_config.d/"
log "ready: $VENV (labkit doctor checks it)"
