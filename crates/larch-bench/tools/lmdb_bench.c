/*
 * lmdb_bench: a minimal C benchmark over liblmdb, the reference that larch-bench's LMDB
 * figures are cross-checked against (docs/design/bench-method.md). It does what
 * larch-bench's LMDB adapter does, with nothing in between:
 *   env flags MDB_WRITEMAP|MDB_NOTLS|MDB_NOSYNC|MDB_NOMETASYNC, one write txn per put
 *   (MDB_APPEND for fillseq), reads renew/get/reset a read-only txn per op, readseq walks a
 *   cursor. Keys are "%016llu"; values are 100-byte slices of a compressible pool; random keys
 *   are splitmix64() % num.
 * Usage: lmdb_bench DIR NUM BENCH[,BENCH...]   (fillseq fillrandom readrandom readseq)
 * Prints db_bench-style lines: "name : x micros/op y ops/sec ...".
 */
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define VALUE_BYTES 100
#define KEY_BYTES 16
#define POOL_BYTES (1 << 20)

static char pool[POOL_BYTES + VALUE_BYTES];
static size_t pool_pos;
static uint64_t rng_state;
static MDB_dbi dbi;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t splitmix64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void make_pool(void) {
    /* LevelDB's Random(301) + CompressibleString(ratio 0.5, 100 bytes). */
    uint32_t seed = 301;
    size_t n = 0;
    while (n < POOL_BYTES) {
        char raw[50];
        for (int i = 0; i < 50; i++) {
            uint64_t product = (uint64_t)seed * 16807;
            seed = (uint32_t)((product >> 31) + (product & 2147483647u));
            if (seed > 2147483647u) seed -= 2147483647u;
            raw[i] = ' ' + seed % 95;
        }
        memcpy(pool + n, raw, 50);
        memcpy(pool + n + 50, raw, 50);
        n += 100;
    }
}

static char *next_value(void) {
    if (pool_pos + VALUE_BYTES > POOL_BYTES) pool_pos = 0;
    pool_pos += VALUE_BYTES;
    return pool + pool_pos - VALUE_BYTES;
}

/* "%016llu" without snprintf: the same digit loop as larch-bench's KeyGen, so that both sides
 * spend the same time making keys and the comparison is about the library path. */
static void key16(char *out, uint64_t n) {
    for (int i = KEY_BYTES - 1; i >= 0; i--) {
        out[i] = (char)('0' + n % 10);
        n /= 10;
    }
}

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", what, mdb_strerror(rc));
        exit(1);
    }
}

static void report(const char *name, double secs, uint64_t ops, uint64_t bytes, const char *msg) {
    printf("%-12s : %11.3f micros/op %.0f ops/sec %.3f seconds %llu operations; %6.1f MB/s %s\n",
           name, secs * 1e6 / (double)ops, ops / secs, secs, (unsigned long long)ops,
           bytes / 1048576.0 / secs, msg);
    fflush(stdout);
}

static MDB_env *open_env(const char *dir, int fresh) {
    MDB_env *env;
    MDB_txn *txn;
    char cmd[4096];
    if (fresh) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0) exit(1);
    }
    mkdir(dir, 0755);
    check(mdb_env_create(&env), "mdb_env_create");
    check(mdb_env_set_mapsize(env, (size_t)4 << 30), "mdb_env_set_mapsize");
    check(mdb_env_set_maxreaders(env, 32), "mdb_env_set_maxreaders");
    check(mdb_env_open(env, dir, MDB_WRITEMAP | MDB_NOTLS | MDB_NOSYNC | MDB_NOMETASYNC, 0644),
          "mdb_env_open");
    check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
    check(mdb_dbi_open(txn, NULL, 0, &dbi), "mdb_dbi_open");
    check(mdb_txn_commit(txn), "mdb_txn_commit");
    return env;
}

static void fill(MDB_env *env, uint64_t num, int seq) {
    char key[32];
    MDB_val k, v;
    double t0 = now_s();
    for (uint64_t i = 0; i < num; i++) {
        MDB_txn *txn;
        uint64_t n = seq ? i : splitmix64() % num;
        key16(key, n);
        k.mv_size = KEY_BYTES;
        k.mv_data = key;
        v.mv_size = VALUE_BYTES;
        v.mv_data = next_value();
        check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin");
        check(mdb_put(txn, dbi, &k, &v, seq ? MDB_APPEND : 0), "mdb_put");
        check(mdb_txn_commit(txn), "mdb_txn_commit");
    }
    report(seq ? "fillseq" : "fillrandom", now_s() - t0, num,
           num * (KEY_BYTES + VALUE_BYTES), "");
}

static void readrandom(MDB_env *env, uint64_t num) {
    char key[32], msg[64];
    MDB_val k, v;
    MDB_txn *txn;
    uint64_t found = 0, bytes = 0;
    double t0 = now_s();
    check(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), "mdb_txn_begin");
    mdb_txn_reset(txn);
    for (uint64_t i = 0; i < num; i++) {
        key16(key, splitmix64() % num);
        k.mv_size = KEY_BYTES;
        k.mv_data = key;
        check(mdb_txn_renew(txn), "mdb_txn_renew");
        int rc = mdb_get(txn, dbi, &k, &v);
        if (rc == 0) {
            found++;
            bytes += KEY_BYTES + v.mv_size;
        } else if (rc != MDB_NOTFOUND) {
            check(rc, "mdb_get");
        }
        mdb_txn_reset(txn);
    }
    mdb_txn_abort(txn);
    snprintf(msg, sizeof(msg), "(%llu of %llu found)", (unsigned long long)found,
             (unsigned long long)num);
    report("readrandom", now_s() - t0, num, bytes, msg);
}

static void readseq(MDB_env *env) {
    MDB_val k, v;
    MDB_txn *txn;
    MDB_cursor *cur;
    uint64_t n = 0, bytes = 0;
    double t0 = now_s();
    check(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), "mdb_txn_begin");
    check(mdb_cursor_open(txn, dbi, &cur), "mdb_cursor_open");
    while (mdb_cursor_get(cur, &k, &v, n == 0 ? MDB_FIRST : MDB_NEXT) == 0) {
        n++;
        bytes += k.mv_size + v.mv_size;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    report("readseq", now_s() - t0, n, bytes, "");
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DIR NUM fillseq,fillrandom,readrandom,readseq\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    uint64_t num = strtoull(argv[2], NULL, 10);
    if (num == 0) {
        fprintf(stderr, "NUM must be a positive integer\n");
        return 2;
    }
    rng_state = 42;
    make_pool();
    MDB_env *env = NULL;
    char *list = strdup(argv[3]);
    for (char *b = strtok(list, ","); b != NULL; b = strtok(NULL, ",")) {
        int fresh = strcmp(b, "fillseq") == 0 || strcmp(b, "fillrandom") == 0;
        if (env == NULL || fresh) {
            if (env != NULL) mdb_env_close(env);
            env = open_env(dir, fresh);
        }
        if (strcmp(b, "fillseq") == 0) fill(env, num, 1);
        else if (strcmp(b, "fillrandom") == 0) fill(env, num, 0);
        else if (strcmp(b, "readrandom") == 0) readrandom(env, num);
        else if (strcmp(b, "readseq") == 0) readseq(env);
        else {
            fprintf(stderr, "unknown benchmark %s\n", b);
            return 2;
        }
    }
    if (env != NULL) mdb_env_close(env);
    free(list);
    return 0;
}
