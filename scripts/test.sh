#!/usr/bin/env bash
# The test command: every test of the workspace (engine, benchmark driver), then a smoke run of
# the benchmark comparison over every available engine. Run scripts/setup.sh once before.
set -euo pipefail
cd "$(dirname "$0")/.."

# The engine's layers: no import cycle among its modules or files (ARCHITECTURE.md).
python3 scripts/import-graph.py

cargo test --workspace

# The C API (crates/larch-c): its tests in C and the README's C example, under
# AddressSanitizer/UBSan and under valgrind (docs/design/c-api.md).
bash crates/larch-c/tests/c/run.sh

# The Python package (bindings/python): installed as a user would (`pip install`, which builds
# the wheel with maturin), then its pytest suite, and its benchmark beside py-lmdb at a tiny
# scale (that it runs, not how fast). Run from outside the source folder, so that the tests
# import the installed package.
# (--no-build-isolation: the build uses the maturin setup.sh installed, found on PATH.)
PATH="$PWD/target/python-venv/bin:$PATH" target/python-venv/bin/pip install --quiet \
  --force-reinstall --no-deps --no-build-isolation ./bindings/python
(cd bindings/python/tests && ../../../target/python-venv/bin/python -m pytest -q -p no:cacheprovider .)
target/python-venv/bin/python bindings/python/bench/bench.py --num 2000 --runs 1
target/python-venv/bin/python bindings/python/bench/turns.py --txns 50 --runs 1

# The published crates (larchdb, larch-cli, larch-bench): first what crates.io and docs.rs show
# that cargo does not check (the licence text in each crate, absolute links in each crate's
# README and crate docs, one minimum Rust version stated everywhere: scripts/check-crates.py),
# then `cargo package`, with no warning: each packaged as it would be published, and each
# verified by a build of its packaged sources. larch-cli and larch-bench build against the
# packaged larchdb, which cargo serves them from a local registry (target/package/tmp-registry)
# since it is not on crates.io yet. Every crate is verified, none packaged with --no-verify:
# the verifying builds share target/ and reuse the workspace's dependencies, so they cost the
# three crates' own compilation (and, the first time, the few dependencies whose features
# differ outside the workspace), seconds when nothing changed.
python3 scripts/check-crates.py
# Cargo extracts a crate of that local registry into its registry/src once per registry path
# and version, and reuses the extraction after: with the version still 0.1.0, a larchdb
# packaged by an earlier run in the same place would stand in for this one, and larch-bench's
# verifying build would fail on any API added since. So the extractions of the workspace's
# crates go first (they are never crates.io's: none is published yet). A target/ kept from
# such a run keeps its build of the stale copy too (cargo takes a registry's crates as never
# changing): CI's clean clone has none; elsewhere, remove target/ after such a failure.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
rm -rf "$cargo_home"/registry/src/*/larchdb-0.1.0 "$cargo_home"/registry/src/*/larch-cli-0.1.0 \
  "$cargo_home"/registry/src/*/larch-bench-0.1.0
package_log=$(cargo package -p larchdb -p larch-cli -p larch-bench --offline --allow-dirty 2>&1) ||
  { echo "$package_log"; exit 1; }
if grep -q '^warning' <<<"$package_log"; then
  echo "$package_log"
  exit 1
fi

# The engine's examples (crates/larchdb/examples), run as a user would run them.
for example in quickstart readers typed; do
  cargo run --release --quiet -p larchdb --features serde --example "$example"
done
# Two writer processes taking turns on one database (a handover at most transactions).
cargo run --release --quiet -p larchdb --example turns -- 2 500 none

# The README's replicated cluster: three node processes formed into one, a write and a
# linearizable read through it, then stopped (its fault test ran with the workspace's tests;
# the debug build those tests made, rather than a release build of its own).
cluster_dir=$(mktemp -d)
cargo run --quiet -p larch-kv -- cluster --dir="$cluster_dir" --port=0 --run-for=1
rm -rf "$cluster_dir"

# Smoke comparison: tiny, so that it checks that every adapter works, not how fast it is.
cargo build --release -p larch-bench
smoke_dir=$(mktemp -d)
trap 'rm -rf "$smoke_dir"' EXIT
./target/release/larch-bench --engine=all --num=10000 \
  --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,seekrandom,readwhilewriting,updaterandom,deleterandom \
  --threads=1,2 --progress=0 --db="$smoke_dir" --json="$smoke_dir/smoke.jsonl"
# Every available engine ran every benchmark; none failed.
if grep -q '"status":"error"' "$smoke_dir/smoke.jsonl"; then
  grep '"status":"error"' "$smoke_dir/smoke.jsonl"
  exit 1
fi
test -s "$smoke_dir/smoke.jsonl"

# Every suite (the seed reports' and YCSB's) at the tiny scale over every available engine:
# checks each suite's plan of driver runs, the driver features they use (memory cgroups,
# dropped caches, time series, multi-threaded unique inserts) and the rendering of report.md
# and the charts. A failed step makes the suite exit non-zero; any error row fails too.
for suite in inmem ondisk memsweep tupl pmemkv ycsb; do
  ./target/release/larch-bench suite "$suite" --scale=tiny --out="$smoke_dir/suite-$suite" \
    --db="$smoke_dir/suite-db"
  if grep -q '"status":"error"' "$smoke_dir/suite-$suite/results.jsonl"; then
    grep '"status":"error"' "$smoke_dir/suite-$suite/results.jsonl"
    exit 1
  fi
  test -s "$smoke_dir/suite-$suite/report.md"
done
