#!/bin/sh
# Build the DIGITS Core container image without a registry of images (tests/test_container_run.py,
# in make test and make test-container, runs this first):
#
#   1. a Debian base root filesystem from Debian's packages (mmdebstrap), imported into podman
#      as $DIGITS_BASE_IMAGE (default localhost/digits-base:bookworm; kept, built once);
#   2. the repository's Dockerfile built with podman (docker format: HEALTHCHECK and SHELL kept)
#      on that base: --build-arg BASE_IMAGE=$DIGITS_BASE_IMAGE, tagged $DIGITS_IMAGE
#      (default localhost/digits-core:test).
#
# pip inside the build installs from the package registry. The host's CA bundle is mounted
# into the build (a registry reached through a proxy with its own CA), and so are the local
# package indexes and wheel folders the host's pip is configured with (file:// indexes,
# find-links folders), read-only, so what lies on this machine's disk is not downloaded again.
# Runs need podman's runc runtime and cgroupfs manager (crun fails on hybrid cgroup layouts).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=${DIGITS_IMAGE:-localhost/digits-core:test}
BASE=${DIGITS_BASE_IMAGE:-localhost/digits-base:bookworm}
SUITE=${DIGITS_BASE_SUITE:-bookworm}
PY=${PY:-python3}
PODMAN="podman --runtime runc --cgroup-manager=cgroupfs"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/digits-container.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
started=$(date +%s)

if ! $PODMAN image exists "$BASE"; then
    echo "build-container: base root filesystem ($SUITE) with mmdebstrap..." >&2
    # Streamed into podman import, no tarball on disk; a failed mmdebstrap leaves no base behind.
    { mmdebstrap --quiet --variant=apt --include=python3,python3-venv "$SUITE" - || touch "$WORK/failed"; } \
        | $PODMAN import --quiet - "$BASE" >/dev/null || touch "$WORK/failed"
    if [ -e "$WORK/failed" ]; then
        $PODMAN image rm -f "$BASE" >/dev/null 2>&1 || true
        echo "build-container: mmdebstrap or podman import failed; no base image kept" >&2
        exit 1
    fi
    echo "build-container: base $BASE imported after $(( $(date +%s) - started )) s" >&2
fi

# pip's settings for the build, and the host folders they name (mounted read-only at the same paths).
pip_for_host=$ROOT/.venv/bin/python
[ -x "$pip_for_host" ] || pip_for_host=$PY
mounts=$("$PY" - "$pip_for_host" "$WORK/pip.conf" <<'EOF'
import os
import subprocess
import sys

python, conf = sys.argv[1], sys.argv[2]
listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
values = {}
for line in listed.splitlines():
    key, _, value = line.partition("=")
    values[key.split(".", 1)[-1]] = value.strip().strip("'\"")
lines, folders = ["[global]"], []
if os.path.isfile("/etc/ssl/certs/ca-certificates.crt"):
    lines.append("cert = /etc/ssl/certs/ca-certificates.crt")
    folders.append("/etc/ssl/certs/ca-certificates.crt")
for key in ("extra-index-url", "find-links"):
    local = [v for v in values.get(key, "").split() if os.path.isdir(v.removeprefix("file://"))]
    if local:
        lines.append(f"{key} = {' '.join(local)}")
        folders += [v.removeprefix("file://").rstrip("/").removesuffix("/simple") for v in local]
open(conf, "w").write("\n".join(lines) + "\n")
print(" ".join(f"-v {f}:{f}:ro" for f in dict.fromkeys(folders)))
EOF
)
echo "build-container: podman build of $ROOT/Dockerfile on $BASE..." >&2
# shellcheck disable=SC2086  # $mounts is a list of -v options
$PODMAN build --quiet --format docker --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
    --build-arg BASE_IMAGE="$BASE" -v "$WORK/pip.conf:/etc/pip.conf:ro" $mounts \
    -t "$IMAGE" "$ROOT" >/dev/null
echo "build-container: $IMAGE built after $(( $(date +%s) - started )) s" >&2
