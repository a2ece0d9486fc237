#!/usr/bin/env bash
# Installs the Debian packages listed in scripts/test-peers.txt that are missing (as root, with
# apt-get), or stops before any test with the one command that installs them. `npm test` runs it
# first (the pretest script), so `.ci/run` and a developer's `npm test` share it.
set -euo pipefail
list="$(dirname "$0")/test-peers.txt"
missing=()
while read -r pkg file; do
  case "$pkg" in ''|'#'*) continue ;; esac
  [ -e "$file" ] || missing+=("$pkg")
done < "$list"
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test peers: installing ${missing[*]} (Debian packages the tests drive as real peers)" >&2
  if DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    exit 0
  fi
  echo "test peers: apt-get could not install ${missing[*]}" >&2
fi
echo "The tests need Debian packages that are not installed. Run, then npm test again:" >&2
echo "  sudo apt-get install -y ${missing[*]}" >&2
exit 1
