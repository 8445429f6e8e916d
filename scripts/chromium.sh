#!/usr/bin/env bash
# Prints the path of a Chromium for the bull-board browser test (__test__/bull-board.spec.mjs):
# Debian's `chromium`, installed with apt-get when missing and we are root. Prints nothing (and
# says why on stderr) when none can be had; the test then skips with that reason.
set -uo pipefail
if path=$(command -v chromium 2>/dev/null); then
  echo "$path"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
  echo "chromium.sh: no chromium, and installing it needs root and apt-get (apt-get install chromium)" >&2
  exit 0
fi
echo "chromium.sh: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends chromium >&2; then
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends chromium >&2
fi
command -v chromium || echo "chromium.sh: apt-get could not install chromium" >&2
exit 0
