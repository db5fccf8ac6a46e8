#!/usr/bin/env bash
# Installs everything Larch needs on a fresh Debian 12 machine: the Rust components used by the
# gates, and the peer engines' libraries and reference tools used by larch-bench and the interop
# tests. Safe to run twice.
set -euo pipefail

packages=(
  pkg-config build-essential
  liblmdb-dev lmdb-utils          # LMDB 0.9.24: peer engine, mdb_dump/mdb_load interop
  librocksdb-dev rocksdb-tools    # RocksDB 7.8.3: peer engine, db_bench cross-check
  libleveldb-dev                  # LevelDB 1.23
  libdb-dev                       # BerkeleyDB 5.3
  db-util                         # BerkeleyDB 5.3 db_dump/db_load: larch-cli interop tests
  libwiredtiger-dev               # WiredTiger 3.2.1
  libclang-dev                    # libmdbx: the mdbx-sys crate generates its bindings (bindgen)
  python3                         # larch-bench tools/crosscheck.sh (medians)
  python3-venv                    # the Python package's tests (bindings/python)
  gcc valgrind                    # the C API's tests (crates/larch-c/tests/c/run.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi

rustup component add rustfmt clippy >/dev/null 2>&1 || true

# The Python package (bindings/python): a virtual environment under target/ with its build
# tool (maturin), its tests' runner (pytest) and the peer of its benchmark (py-lmdb, `lmdb`),
# all from PyPI. scripts/test.sh installs the package into it (`pip install ./bindings/python`).
cd "$(dirname "$0")/.."
venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --upgrade "maturin>=1.9,<2" "pytest>=7" "lmdb>=1.4"
