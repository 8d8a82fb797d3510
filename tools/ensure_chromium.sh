#!/usr/bin/env bash
# Make sure Debian's Chromium is present for the real-browser test (never downloads a browser of its own).
set -u
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's chromium for the browser test (apt-get install -y chromium)…"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && exit 0
fi
echo "warning: Chromium not found; the e2e test will fail. Install it with: sudo apt-get install -y chromium" >&2
exit 0
