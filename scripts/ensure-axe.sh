#!/usr/bin/env bash
# Install axe-core (npm) for the browser tests' accessibility checks into tests/a11y/node_modules.
# Idempotent: does nothing when it is there. Needs node and npm (apt-get install nodejs npm).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)/tests/a11y"
if [ -f "$here/node_modules/axe-core/axe.min.js" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "ensure-axe: npm is missing (apt-get install -y nodejs npm)" >&2
  exit 1
fi
npm install --prefix "$here" --no-audit --no-fund --loglevel=error
test -f "$here/node_modules/axe-core/axe.min.js"
