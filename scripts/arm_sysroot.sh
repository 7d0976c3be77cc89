#!/bin/sh
# Builds the aarch64 CPython 3.11 sysroot that onnxedge's ARM tests run under qemu-aarch64.
#
# Usage: scripts/arm_sysroot.sh [ARM_DIR]        (ARM_DIR defaults to <repo>/.arm, gitignored)
# Leaves (idempotent; a finished step is skipped, delete ARM_DIR to start over):
#   ARM_DIR/sysroot/usr/bin/python3.11   Debian bookworm's arm64 CPython with its stdlib and libs
#   ARM_DIR/site/                        aarch64 wheels for cp311: numpy, flatbuffers (pinned) and
#                                        onnxruntime's own manylinux aarch64 wheel (the reference the
#                                        aarch64 benchmark and tests compare with)
#   ARM_DIR/sysroot/proc/cpuinfo         a Raspberry Pi 4's /proc/cpuinfo (Cortex-A72), see below
# Needs: apt-get, dpkg, qemu-user (qemu-aarch64) and the host venv's pip (.venv/bin/python).
# Run Python under emulation with scripts/qemu-python.
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
ARM_DIR=${1:-$REPO/.arm}
PIP_PY=${PIP_PY:-$REPO/.venv/bin/python}
NUMPY_VERSION=${NUMPY_VERSION:-2.4.6}
FLATBUFFERS_VERSION=${FLATBUFFERS_VERSION:-25.12.19}
# The host venv's onnxruntime (pyproject.toml); its cp311 aarch64 wheel is built against numpy 2
# (ABI-compatible with NUMPY_VERSION above) and needs glibc 2.28 (bookworm has 2.36).
ORT_VERSION=${ORT_VERSION:-1.31.1}
SYSROOT=$ARM_DIR/sysroot
SITE=$ARM_DIR/site
APTDIR=$ARM_DIR/apt
# The arm64 packages CPython 3.11 needs (apt resolves the rest of their Depends).
ROOTS="python3.11-minimal libpython3.11-stdlib libstdc++6 libgcc-s1"

say() { echo "[arm-sysroot] $*"; }

mkdir -p "$SYSROOT" "$SITE" "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/debs" "$APTDIR/empty"

if [ ! -x "$SYSROOT/usr/bin/python3.11" ]; then
    say "private apt configuration for arm64 in $APTDIR"
    cat > "$APTDIR/sources.list" <<SRC
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
SRC
    : > "$APTDIR/status"
    cat > "$APTDIR/apt.conf" <<CONF
APT::Architecture "arm64";
APT::Architectures { "arm64"; };
Dir::State "$APTDIR";
Dir::State::Lists "$APTDIR/lists";
Dir::State::status "$APTDIR/status";
Dir::Cache "$APTDIR/cache";
Dir::Etc::SourceList "$APTDIR/sources.list";
Dir::Etc::SourceParts "$APTDIR/empty";
Dir::Etc::Preferences "$APTDIR/empty/none";
Dir::Etc::PreferencesParts "$APTDIR/empty";
APT::Sandbox::User "root";
APT::Get::List-Cleanup "false";
CONF
    export APT_CONFIG="$APTDIR/apt.conf"
    say "apt-get update (arm64 package lists)"
    apt-get -q update >/dev/null
    say "resolving the dependencies of: $ROOTS"
    PKGS=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances $ROOTS | grep -E '^[a-z0-9]' \
        | grep -v -E '^(debconf|debconf-2.0|perl-base|dpkg|tar|install-info|awk|mawk)$' | sort -u)
    say "downloading $(echo $PKGS | wc -w) arm64 packages"
    (cd "$APTDIR/debs" && apt-get -q download $PKGS >/dev/null)
    for deb in "$APTDIR"/debs/*.deb; do
        dpkg -x "$deb" "$SYSROOT"
    done
    say "unpacked into $SYSROOT ($(du -sh "$SYSROOT" | cut -f1))"
else
    say "sysroot present: $SYSROOT/usr/bin/python3.11"
fi

if [ ! -d "$SITE/numpy" ] || [ ! -f "$SITE/.numpy-$NUMPY_VERSION" ]; then
    say "aarch64 wheels into $SITE: numpy==$NUMPY_VERSION flatbuffers==$FLATBUFFERS_VERSION"
    rm -rf "$SITE" && mkdir -p "$SITE"
    "$PIP_PY" -m pip install -q --target "$SITE" --platform manylinux_2_28_aarch64 \
        --only-binary=:all: --python-version 3.11 --implementation cp \
        "numpy==$NUMPY_VERSION" "flatbuffers==$FLATBUFFERS_VERSION"
    touch "$SITE/.numpy-$NUMPY_VERSION"
else
    say "wheels present: $SITE"
fi

# qemu-user 7.2 passes the host's (x86) /proc/cpuinfo through to an aarch64 guest; onnxruntime's
# cpuinfo library finds no ARM core in it and crashes (SIGSEGV) when the module loads. qemu looks
# a guest's absolute paths up under -L first, so the sysroot gets the /proc/cpuinfo of a Pi 4
# (Cortex-A72, the CPU qemu-python emulates), one entry per CPU this machine has.
NCPU=$(getconf _NPROCESSORS_CONF 2>/dev/null || echo 4)
say "sysroot/proc/cpuinfo: a Raspberry Pi 4's (Cortex-A72) for $NCPU CPUs (qemu shows the guest the host's)"
mkdir -p "$SYSROOT/proc"
i=0
: > "$SYSROOT/proc/cpuinfo.tmp"
while [ "$i" -lt "$NCPU" ]; do
    printf 'processor\t: %d\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\nCPU revision\t: 3\n\n' "$i" >> "$SYSROOT/proc/cpuinfo.tmp"
    i=$((i + 1))
done
mv "$SYSROOT/proc/cpuinfo.tmp" "$SYSROOT/proc/cpuinfo"

if [ ! -f "$SITE/.onnxruntime-$ORT_VERSION" ]; then
    WHEELS=$ARM_DIR/wheels
    mkdir -p "$WHEELS"
    say "onnxruntime==$ORT_VERSION: downloading its manylinux aarch64 cp311 wheel from PyPI into $WHEELS"
    # --no-deps: numpy and flatbuffers are in $SITE already; packaging, protobuf and sympy are only
    # imported by onnxruntime's tools (quantization, transformers), not by InferenceSession.
    "$PIP_PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 \
        --python-version 3.11 --implementation cp -d "$WHEELS" "onnxruntime==$ORT_VERSION"
    WHL=$(ls "$WHEELS"/onnxruntime-"$ORT_VERSION"-cp311-*aarch64*.whl 2>/dev/null | head -n 1)
    [ -n "$WHL" ] || { say "pip left no onnxruntime-$ORT_VERSION cp311 aarch64 wheel in $WHEELS"; exit 1; }
    say "unpacking $(basename "$WHL") into $SITE"
    rm -rf "$SITE/onnxruntime" "$SITE"/onnxruntime-*.dist-info
    "$PIP_PY" -m zipfile -e "$WHL" "$SITE"
    touch "$SITE/.onnxruntime-$ORT_VERSION"
else
    say "onnxruntime $ORT_VERSION (aarch64) present in $SITE"
fi

say "check: numpy and onnxruntime under qemu-aarch64"
"$REPO/scripts/qemu-python" -c "import platform, numpy; print('[arm-sysroot]', platform.machine(), 'python', platform.python_version(), 'numpy', numpy.__version__)"
"$REPO/scripts/qemu-python" -c "import onnxruntime; print('[arm-sysroot] onnxruntime', onnxruntime.__version__, onnxruntime.get_available_providers())"
