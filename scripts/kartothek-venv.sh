#!/usr/bin/env bash
# Build .venv-kartothek: kartothek 5.3.0 on pyenv's Python 3.8.18, used by tests/kartothek to
# check that kartothek reads/updates what parquetry writes and vice versa.
#
# Idempotent: a stamp file records the pinned set; when it matches, the script exits at once.
# Exit code 0 with a message when Python 3.8 is not installed (the tests then skip themselves).
# Env overrides: KARTOTHEK_PYTHON (interpreter), KARTOTHEK_VENV (venv directory).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY38="${KARTOTHEK_PYTHON:-$HOME/.pyenv/versions/3.8.18/bin/python}"
VENV="${KARTOTHEK_VENV:-$ROOT/.venv-kartothek}"
STAMP="$VENV/.parquetry-kartothek-stamp"

# The set known to install and pass kartothek's own suite (docs: shared notes §8). Unpinned
# installs resolve pandas 2 / numpy 1.24, which kartothek 5.3.0 does not support.
PINS=(
    "kartothek==5.3.0"
    "pyarrow==6.0.1"
    "pandas==1.3.5"
    "numpy==1.21.6"
    "dask[dataframe]==2021.12.0"
    "simplekv==0.14.1"
    "storefact==0.11.0"
    "msgpack==1.0.3"
    "zstandard==0.16.0"
)
WANTED="$(printf '%s\n' "${PINS[@]}")"

if [[ ! -x "$PY38" ]]; then
    echo "kartothek-venv: $PY38 not found; skipping (kartothek compatibility tests will skip)" >&2
    exit 0
fi

is_ready() {
    [[ -f "$STAMP" && -x "$VENV/bin/python" ]] && [[ "$(cat "$STAMP")" == "$WANTED" ]]
}
is_ready && exit 0

# Two test runs starting together must not build the same venv at once.
if command -v flock >/dev/null 2>&1; then
    exec 9>"${TMPDIR:-/tmp}/parquetry-kartothek-venv.$(id -u).lock"
    flock 9
    is_ready && exit 0
fi

echo "kartothek-venv: building $VENV with $("$PY38" --version 2>&1) (takes about a minute)" >&2
rm -rf "$VENV"
"$PY38" -m venv "$VENV"
# The machine-wide pip constraints target the main 3.11 env; they do not apply here.
LOG="$VENV/pip-install.log"
if ! PIP_CONSTRAINT= "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
    "${PINS[@]}" >"$LOG" 2>&1; then
    tail -n 30 "$LOG" >&2
    echo "kartothek-venv: pip install failed (full log: $LOG)" >&2
    exit 1
fi
"$VENV/bin/python" -c "import kartothek, pyarrow, pandas, storefact, msgpack, zstandard"
printf '%s\n' "${PINS[@]}" >"$STAMP"
echo "kartothek-venv: ready ($("$VENV/bin/python" -c 'import kartothek; print("kartothek", kartothek.__version__)'))" >&2
