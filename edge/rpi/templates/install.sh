#!/bin/sh
# Installs this onnxedge bundle offline: a Python venv with the bundled wheels, the models and a
# systemd unit that runs `onnxedge serve` (see README.md).
#
# Usage: sudo ./install.sh [--prefix DIR] [--port N] [--host ADDR] [--python PYTHON] [--no-systemd]
#   --prefix     where to install (default /opt/onnxedge)
#   --port/host  where the server listens (default 127.0.0.1:8080)
#   --python     the Python %%PYVER%% to build the venv from (default python%%PYVER%%, else python3)
#   --no-systemd only write PREFIX/onnxedge.service; do not install or start it
# Environment: ONNXEDGE_EMULATOR, a command prefix for running the venv's python (e.g.
# "qemu-aarch64 -L SYSROOT" when testing on another architecture; empty on a Pi).
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=/opt/onnxedge
PORT=%%PORT%%
HOST=127.0.0.1
PYTHON=
SYSTEMD=auto
RUN=${ONNXEDGE_EMULATOR:-}
MODEL=%%MODEL%%
PROVIDERS=%%PROVIDERS%%
PYVER=%%PYVER%%

say() { echo "[onnxedge install] $*"; }
die() { echo "[onnxedge install] error: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX=$2; shift 2 ;;
        --port) PORT=$2; shift 2 ;;
        --host) HOST=$2; shift 2 ;;
        --python) PYTHON=$2; shift 2 ;;
        --no-systemd) SYSTEMD=no; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
if [ -z "$PYTHON" ]; then
    if command -v "python$PYVER" >/dev/null 2>&1; then PYTHON=python$PYVER; else PYTHON=python3; fi
fi
case "$PORT" in ''|*[!0-9]*) die "--port must be a number, got '$PORT'" ;; esac
# PREFIX and HOST go into a sed command and the systemd unit: plain characters only
case "$PREFIX" in /*) ;; *) die "--prefix must be an absolute path, got '$PREFIX'" ;; esac
case "$PREFIX" in *[!A-Za-z0-9._/+-]*) die "--prefix may hold only letters, digits and ._/+-" ;; esac
case "$HOST" in ''|*[!A-Za-z0-9.:-]*) die "--host must be an address or host name, got '$HOST'" ;; esac
case "$MODEL" in ''|*[!A-Za-z0-9._-]*) die "the model file name '$MODEL' is not a plain name" ;; esac

# $PYTHON is split on purpose: it may be an emulator command line
GOT=$($PYTHON -c 'import sys; print("%d.%d" % sys.version_info[:2])') || die "cannot run $PYTHON"
[ "$GOT" = "$PYVER" ] || die "$PYTHON is Python $GOT; this bundle's wheels are for Python $PYVER (give --python)"

PIP_WHEEL=$(ls "$HERE"/wheels/pip-*.whl 2>/dev/null | head -n 1)
[ -n "$PIP_WHEEL" ] || die "no pip wheel in $HERE/wheels"

say "venv in $PREFIX/venv (Python $GOT)"
mkdir -p "$PREFIX"
rm -rf "$PREFIX/venv"
# --without-pip: Debian splits ensurepip out (python3-venv); pip comes from the bundle instead.
# --copies under an emulator: a symlink to /usr/bin/python3.x would name the host's binary.
$PYTHON -m venv --without-pip ${RUN:+--copies} "$PREFIX/venv" || die "python -m venv failed"

say "installing the bundled wheels (offline)"
# pip runs from its own wheel, inside the new venv, and never looks at an index
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_COMPILE=1 \
    $RUN "$PREFIX/venv/bin/python" "$PIP_WHEEL/pip" install -q --no-index --find-links "$HERE/wheels" \
    onnxedge pip || die "pip install from $HERE/wheels failed"

say "models into $PREFIX/models"
mkdir -p "$PREFIX/models"
cp "$HERE"/models/* "$PREFIX/models/"

sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@MODEL@|$MODEL|g" -e "s|@HOST@|$HOST|g" \
    -e "s|@PORT@|$PORT|g" -e "s|@PROVIDERS@|$PROVIDERS|g" \
    "$HERE/onnxedge.service.in" > "$PREFIX/onnxedge.service"
say "systemd unit written: $PREFIX/onnxedge.service"

$RUN "$PREFIX/venv/bin/python" -I -c "import onnxedge; print('[onnxedge install] onnxedge', onnxedge.__version__, 'providers:', ', '.join(onnxedge.get_available_providers()))"

if [ "$SYSTEMD" = auto ] && [ "$(id -u)" = 0 ] && command -v systemctl >/dev/null 2>&1 \
        && [ -d /run/systemd/system ]; then
    cp "$PREFIX/onnxedge.service" /etc/systemd/system/onnxedge.service
    systemctl daemon-reload
    systemctl enable --now onnxedge.service
    say "service onnxedge started: curl http://$HOST:$PORT/healthz"
else
    say "systemd unit not installed; start the server with:"
    say "  $PREFIX/venv/bin/onnxedge serve $PREFIX/models/$MODEL --host $HOST --port $PORT"
fi
