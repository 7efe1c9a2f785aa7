#!/usr/bin/env bash
# install.sh — make sure a headless Chromium is installed for loadgen's report test
# (TestReportRendersInChromium), from Debian's chromium package (apt-get, as root) when it is
# missing. Prints the browser's path on its last line. Env: CHROMIUM (a browser binary to use
# instead).
set -euo pipefail
if [ -n "${CHROMIUM:-}" ]; then
  command -v "$CHROMIUM"
  exit 0
fi
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "chromium is missing: install Debian's chromium package (sudo apt-get install chromium) or set CHROMIUM" >&2
    exit 1
  fi
  echo "installing chromium (apt-get)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
fi
command -v chromium
