#!/bin/sh
# Make sure Orthanc and its DICOMweb plugin exist for the PACS tests (plugins/data_dicomweb/tests).
# Installs Debian's `orthanc` and `orthanc-dicomweb` packages with apt-get when they are missing and we
# run as root (CI's fresh machine); otherwise says what to do. Never fails the build: the PACS tests
# skip themselves without Orthanc (and fail instead under CI=true, see the tests' conftest).
set -u
if [ -x /usr/sbin/Orthanc ] && [ -f /usr/share/orthanc/plugins/libOrthancDicomWeb.so ]; then
    exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-orthanc: Orthanc missing; install it (sudo apt-get install orthanc orthanc-dicomweb) to run the PACS tests." >&2
    exit 0
fi
echo "ensure-orthanc: installing orthanc and orthanc-dicomweb with apt-get..." >&2
# policy-rc.d keeps the package from starting a system-wide Orthanc service; the tests start their own.
flock /tmp/digits-pip.lock sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq orthanc orthanc-dicomweb' >&2 \
    || echo "ensure-orthanc: apt-get install failed; the PACS tests will be skipped." >&2
# a packaged service may have been started by the install: the tests never use it
if command -v service >/dev/null 2>&1; then service orthanc stop >/dev/null 2>&1 || true; fi
exit 0
