#!/bin/sh
# Make sure /usr/bin/chromium exists for the browser tests (tests/test_ui_browser.py).
# Installs Debian's `chromium` package with apt-get when it is missing and we run as root
# (CI's fresh machine); otherwise says what to do. Never fails the build: the browser
# tests skip themselves without a browser.
set -u
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    echo "ensure-chromium: /usr/bin/chromium missing; install it (sudo apt-get install chromium) to run the browser tests." >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: /usr/bin/chromium missing and apt-get unavailable; the browser tests will be skipped." >&2
    exit 0
fi
echo "ensure-chromium: installing chromium with apt-get..." >&2
if command -v flock >/dev/null 2>&1; then
    flock /tmp/digits-pip.lock sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium' >&2 \
        || echo "ensure-chromium: apt-get install chromium failed; the browser tests will be skipped." >&2
else
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2 \
        || echo "ensure-chromium: apt-get install chromium failed; the browser tests will be skipped." >&2
fi
exit 0
