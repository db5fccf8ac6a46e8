#!/usr/bin/env bash
# Cross-checks larch-bench's peer figures against the peers' own tools on the same workload:
#   RocksDB: larch-bench --engine=rocksdb vs RocksDB's db_bench (Debian rocksdb-tools)
#   LMDB:    larch-bench --engine=lmdb    vs tools/lmdb_bench.c (liblmdb, nothing in between)
# Runs are interleaved RUNS times; the medians are printed with their ratio. The acceptance bar
# (docs/design/bench-method.md) is |ratio - 1| <= 0.15.
# Usage: crates/larch-bench/tools/crosscheck.sh [NUM] [RUNS] [DIR]
set -euo pipefail
num="${1:-1000000}"
runs="${2:-3}"
dir="${3:-/tmp/larch-crosscheck}"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cd "$root"
cargo build --release -p larch-bench >&2
lmdb_c="$(crates/larch-bench/tools/build-lmdb-bench.sh)"
db_bench="$(command -v db_bench || command -v rocksdb_db_bench || true)"
[ -n "$db_bench" ] || { echo "db_bench not found: apt-get install rocksdb-tools" >&2; exit 1; }
benches=fillseq,readrandom,readseq,fillrandom
mkdir -p "$dir"
out="$dir/results.txt"
: > "$out"
# Each tool run starts after `sync` and a pause, so that no run pays for the write-back of the
# previous one's dirty pages, and the order alternates between rounds.
settle() { sync; sleep 2; }
run_db_bench() {
  settle
  "$db_bench" --benchmarks=$benches --num="$num" --key_size=16 --value_size=100 \
    --compression_type=none --compression_ratio=0.5 --cache_size=33554432 --bloom_bits=10 \
    --max_background_jobs=2 --sync=0 --threads=1 --seed=42 --db="$dir/db_bench" 2>/dev/null |
    grep -E '^\S+ +:.*micros/op' | sed 's/^/db_bench /' >> "$out"
}
run_lb_rocksdb() {
  settle
  target/release/larch-bench --engine=rocksdb --key_format=rocksdb --benchmarks=$benches \
    --num="$num" --cache_size=33554432 --bloom_bits=10 --seed=42 --progress=0 --db="$dir" 2>/dev/null |
    grep -E '^\S+ +:.*micros/op' | sed 's/^/lb_rocksdb /' >> "$out"
}
run_lmdb_c() {
  settle
  "$lmdb_c" "$dir/lmdb_c" "$num" $benches | sed 's/^/lmdb_c /' >> "$out"
}
run_lb_lmdb() {
  settle
  target/release/larch-bench --engine=lmdb --benchmarks=$benches --num="$num" --seed=42 \
    --progress=0 --db="$dir" 2>/dev/null | grep -E '^\S+ +:.*micros/op' | sed 's/^/lb_lmdb /' >> "$out"
}
for i in $(seq 1 "$runs"); do
  if [ $((i % 2)) -eq 1 ]; then
    run_db_bench; run_lb_rocksdb; run_lmdb_c; run_lb_lmdb
  else
    run_lb_rocksdb; run_db_bench; run_lb_lmdb; run_lmdb_c
  fi
done
python3 - "$out" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tool, rest = line.split(" ", 1)
    m = re.match(r"(\S+)\s+:\s+(\d+\.\d+) micros/op (\d+) ops/sec", rest)
    if m:
        rows.setdefault((tool, m.group(1)), []).append(int(m.group(3)))
print("| engine | benchmark | reference ops/s (median) | larch-bench ops/s (median) | ratio | runs |")
print("|---|---|---|---|---|---|")
for ref, lb, eng in (("db_bench", "lb_rocksdb", "rocksdb"), ("lmdb_c", "lb_lmdb", "lmdb")):
    for b in ("fillseq", "fillrandom", "readrandom", "readseq"):
        r, l = rows.get((ref, b)), rows.get((lb, b))
        if not r or not l:
            continue
        mr, ml = statistics.median(r), statistics.median(l)
        print(f"| {eng} | {b} | {mr:.0f} | {ml:.0f} | {ml/mr:.3f} | {len(r)} |")
PY
