#!/bin/sh
# Make sure podman, runc and mmdebstrap exist for the container test (make test, make test-container).
# Installs Debian's packages with apt-get when one is missing and we run as root (CI's fresh
# machine; about a minute here); otherwise says what to do. Never fails: without podman,
# tests/test_container_run.py skips itself and says why.
set -u
missing=""
for tool in podman runc mmdebstrap; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-podman: missing:$missing; install them (sudo apt-get install podman runc mmdebstrap) to run the container test." >&2
    exit 0
fi
echo "ensure-podman: installing$missing with apt-get..." >&2
(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap uidmap) >&2 \
    || echo "ensure-podman: apt-get install failed; the container test will be skipped." >&2
exit 0
