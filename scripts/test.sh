#!/usr/bin/env bash
# The test command: every test of the workspace (engine, benchmark driver), then a smoke run of
# the benchmark comparison over every available engine. Run scripts/setup.sh once before.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace

# Smoke comparison: tiny, so that it checks that every adapter works, not how fast it is.
cargo build --release -p larch-bench
smoke_dir=$(mktemp -d)
trap 'rm -rf "$smoke_dir"' EXIT
./target/release/larch-bench --engine=all --num=20000 --batch_size=100 \
  --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,seekrandom,readwhilewriting,deleterandom \
  --duration=0 --db="$smoke_dir" --json="$smoke_dir/smoke.jsonl"
test -s "$smoke_dir/smoke.jsonl"
