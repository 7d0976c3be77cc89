#!/bin/sh
# Builds the aarch64 CPython 3.11 sysroot that onnxedge's ARM tests run under qemu-aarch64.
#
# Usage: scripts/arm_sysroot.sh [ARM_DIR]        (ARM_DIR defaults to <repo>/.arm, gitignored)
# Leaves (idempotent; a finished step is skipped, delete ARM_DIR to start over):
#   ARM_DIR/sysroot/usr/bin/python3.11   Debian bookworm's arm64 CPython with its stdlib and libs
#   ARM_DIR/site/                        aarch64 wheels for cp311: numpy, flatbuffers (pinned)
# Needs: apt-get, dpkg, qemu-user (qemu-aarch64) and the host venv's pip (.venv/bin/python).
# Run Python under emulation with scripts/qemu-python.
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
ARM_DIR=${1:-$REPO/.arm}
PIP_PY=${PIP_PY:-$REPO/.venv/bin/python}
NUMPY_VERSION=${NUMPY_VERSION:-2.4.6}
FLATBUFFERS_VERSION=${FLATBUFFERS_VERSION:-25.12.19}
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

say "check: numpy under qemu-aarch64"
"$REPO/scripts/qemu-python" -c "import platform, numpy; print('[arm-sysroot]', platform.machine(), 'python', platform.python_version(), 'numpy', numpy.__version__)"
