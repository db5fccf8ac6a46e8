#!/usr/bin/env bash
# Builds tools/lmdb_bench (the liblmdb reference for the LMDB cross-check) next to this script's
# target directory. Needs gcc and liblmdb-dev (scripts/setup.sh installs both).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../../target/lmdb_bench}"
gcc -O2 -Wall -Wextra -o "$out" "$here/lmdb_bench.c" -llmdb
echo "$out"
