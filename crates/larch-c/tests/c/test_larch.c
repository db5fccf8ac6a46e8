/* The C API's tests, in C: every call, its error paths, handles used after they were freed,
 * and a reader on another thread while the writer commits. Run by tests/c/run.sh (the test
 * command), built once with AddressSanitizer and UndefinedBehaviorSanitizer and once plain
 * under valgrind. Each test opens its own database in a fresh directory. */

#define _GNU_SOURCE
#include "larch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                                       \
  do {                                                                                    \
    checks++;                                                                             \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: %s: check failed: %s (last error: %s)\n", __FILE__,         \
              __LINE__, __func__, #cond, larch_last_error());                             \
      failures++;                                                                         \
    }                                                                                     \
  } while (0)

#define EXPECT(call, code) CHECK((call) == (code))
#define OK(call) EXPECT(call, LARCH_OK)

static char base_dir[256];
static int next_db = 0;

/* A path for a new database in the test's directory. */
static void db_path(char *out, size_t n) {
  snprintf(out, n, "%s/db%d", base_dir, next_db++);
}

static larch_val V(const char *s) {
  larch_val v = {(const uint8_t *)s, strlen(s)};
  return v;
}

static int val_is(larch_val v, const char *s) {
  return v.len == strlen(s) && memcmp(v.data, s, v.len) == 0;
}

static larch_db *open_new(int log) {
  char path[300];
  db_path(path, sizeof path);
  larch_options o;
  larch_options_init(&o);
  o.log = log;
  larch_db *db = NULL;
  OK(larch_open(path, &o, &db));
  return db;
}

static void put_one(larch_db *db, const char *table, const char *k, const char *v) {
  larch_txn *t = NULL;
  OK(larch_begin(db, 0, &t));
  larch_val key = V(k), val = V(v);
  OK(larch_put(t, table, &key, &val, 0));
  OK(larch_commit(t, LARCH_DURABILITY_DEFAULT));
}

/* ---- codes and messages ---- */

static void test_codes(void) {
  CHECK(strcmp(larch_strerror(LARCH_OK), "success") == 0);
  for (int c = 0; c <= 40; c++) CHECK(larch_strerror(c) != NULL);
  CHECK(strcmp(larch_strerror(9999), "unknown code") == 0);
  CHECK(larch_version() != NULL && strchr(larch_version(), '.') != NULL);
  CHECK(larch_last_error() != NULL);
  /* The defaults are the engine's (tests/header.rs compares them with the Rust API's). */
  larch_options o;
  larch_options_init(&o);
  CHECK(o.struct_bytes == sizeof o);
  CHECK(o.page_bytes == 0 && o.read_only == 0 && o.create == 1 && o.log == 1);
  CHECK(o.durability == LARCH_DURABILITY_IMMEDIATE && o.verify_checksums == 0);
  CHECK(o.compact_on_close == 1 && o.checkpoint_bytes == 0);
  CHECK(o.memory_budget == 0 && o.log_room_bytes == 0 && o.frames_bytes == 0);
  for (size_t i = 0; i < sizeof o.reserved / sizeof o.reserved[0]; i++) CHECK(o.reserved[i] == 0);
}

/* ---- open and close ---- */

static void test_open_errors(void) {
  larch_db *db = NULL;
  /* A directory that does not exist. */
  int rc = larch_open("/nonexistent-larch-dir/sub/db", NULL, &db);
  CHECK(rc == LARCH_EIO);
  CHECK(strstr(larch_last_error(), "nonexistent-larch-dir") != NULL);
  EXPECT(larch_open(NULL, NULL, &db), LARCH_EINVAL);
  EXPECT(larch_open("x", NULL, NULL), LARCH_EINVAL);

  /* Options not filled by larch_options_init. */
  larch_options o;
  memset(&o, 0, sizeof o);
  char path[300];
  db_path(path, sizeof path);
  EXPECT(larch_open(path, &o, &db), LARCH_EINVAL);
  /* A page size the engine refuses; an unknown durability. */
  larch_options_init(&o);
  o.page_bytes = 1000;
  EXPECT(larch_open(path, &o, &db), LARCH_EOPTIONS);
  larch_options_init(&o);
  o.durability = 42;
  EXPECT(larch_open(path, &o, &db), LARCH_EINVAL);
  /* Options of another header's size; an option this library does not know. */
  larch_options_init(&o);
  o.struct_bytes -= 8;
  EXPECT(larch_open(path, &o, &db), LARCH_EINVAL);
  CHECK(strstr(larch_last_error(), "struct_bytes") != NULL);
  larch_options_init(&o);
  o.reserved[2] = 1;
  EXPECT(larch_open(path, &o, &db), LARCH_EINVAL);
  CHECK(strstr(larch_last_error(), "reserved[2]") != NULL);
  /* A log room larger than the log can hold. */
  larch_options_init(&o);
  o.log_room_bytes = (uint64_t)1 << 40;
  EXPECT(larch_open(path, &o, &db), LARCH_EOPTIONS);
  CHECK(strstr(larch_last_error(), "log_room_bytes") != NULL);
  /* Read-only, and no file: nothing to read. */
  larch_options_init(&o);
  o.read_only = 1;
  o.create = 0;
  CHECK(larch_open(path, &o, &db) != LARCH_OK);

  /* A file that is not a database. */
  db_path(path, sizeof path);
  FILE *f = fopen(path, "w");
  for (int i = 0; i < 3000; i++) fputs("not a database ", f);
  fclose(f);
  EXPECT(larch_open(path, NULL, &db), LARCH_ENOTADB);

  /* A truncated database: only part of its first page. */
  db_path(path, sizeof path);
  OK(larch_open(path, NULL, &db));
  put_one(db, NULL, "k", "v");
  OK(larch_close(db));
  CHECK(truncate(path, 100) == 0);
  rc = larch_open(path, NULL, &db);
  CHECK(rc == LARCH_ENOTADB || rc == LARCH_ECORRUPTED);
}

static void test_close(void) {
  larch_db *db = open_new(0);
  larch_txn *t = NULL;
  OK(larch_begin(db, LARCH_RDONLY, &t));
  /* Open transactions: nothing is closed. */
  EXPECT(larch_close(db), LARCH_EBUSY);
  CHECK(strstr(larch_last_error(), "transaction") != NULL);
  OK(larch_abort(t));
  OK(larch_close(db));
  /* Closed: every use is a bad handle, never a crash. */
  EXPECT(larch_close(db), LARCH_EBADHANDLE);
  EXPECT(larch_begin(db, 0, &t), LARCH_EBADHANDLE);
  EXPECT(larch_sync(db), LARCH_EBADHANDLE);
  EXPECT(larch_close(NULL), LARCH_EBADHANDLE);
  EXPECT(larch_close((larch_db *)(uintptr_t)0xdeadbeef00000001ull), LARCH_EBADHANDLE);
}

static void test_second_writer(void) {
  char path[300];
  db_path(path, sizeof path);
  larch_db *a = NULL, *b = NULL;
  OK(larch_open(path, NULL, &a));
  EXPECT(larch_open(path, NULL, &b), LARCH_ELOCKED);
  /* A read-only handle beside the writer is fine. */
  larch_options o;
  larch_options_init(&o);
  o.read_only = 1;
  OK(larch_open(path, &o, &b));
  larch_txn *t = NULL;
  EXPECT(larch_begin(b, 0, &t), LARCH_EREADONLY);
  OK(larch_close(b));
  OK(larch_close(a));
}

/* ---- transactions, reads and writes ---- */

static void test_put_get_delete(int log) {
  larch_db *db = open_new(log);
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  OK(larch_table_create(w, "t"));
  larch_val k = V("apple"), v = V("red"), out = {0};
  OK(larch_put(w, "t", &k, &v, 0));
  /* The transaction sees its own writes. */
  OK(larch_get(w, "t", &k, &out));
  CHECK(val_is(out, "red"));
  /* NOOVERWRITE: the key is there. */
  larch_val v2 = V("green");
  EXPECT(larch_put(w, "t", &k, &v2, LARCH_NOOVERWRITE), LARCH_KEYEXIST);
  OK(larch_get(w, "t", &k, &out));
  CHECK(val_is(out, "red"));
  larch_val k2 = V("banana");
  OK(larch_put(w, "t", &k2, &v2, LARCH_NOOVERWRITE));
  /* APPEND: in order, then out of order. */
  larch_val k3 = V("cherry"), k0 = V("aardvark");
  OK(larch_put(w, "t", &k3, &v, LARCH_APPEND));
  EXPECT(larch_put(w, "t", &k0, &v, LARCH_APPEND), LARCH_EAPPEND);
  EXPECT(larch_put(w, "t", &k0, &v, 0xff), LARCH_EINVAL);
  uint64_t n = 0;
  OK(larch_table_len(w, "t", &n));
  CHECK(n == 3);
  uint64_t id = 0;
  OK(larch_txn_id(w, &id));
  CHECK(id > 0);
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));

  larch_txn *r = NULL;
  OK(larch_begin(db, LARCH_RDONLY, &r));
  OK(larch_get(r, "t", &k2, &out));
  CHECK(val_is(out, "green"));
  larch_val missing = V("zzz");
  EXPECT(larch_get(r, "t", &missing, &out), LARCH_NOTFOUND);
  EXPECT(larch_get(r, "nope", &k, &out), LARCH_ETABLENOTFOUND);
  /* Writes in a read transaction. */
  EXPECT(larch_put(r, "t", &k, &v, 0), LARCH_EREADONLY);
  EXPECT(larch_delete(r, "t", &k), LARCH_EREADONLY);
  EXPECT(larch_table_create(r, "u"), LARCH_EREADONLY);
  uint64_t rid = 0;
  OK(larch_txn_id(r, &rid));
  CHECK(rid == id);
  OK(larch_commit(r, LARCH_DURABILITY_DEFAULT));

  OK(larch_begin(db, 0, &w));
  OK(larch_delete(w, "t", &k));
  EXPECT(larch_delete(w, "t", &k), LARCH_NOTFOUND);
  EXPECT(larch_get(w, "t", &k, &out), LARCH_NOTFOUND);
  OK(larch_commit(w, LARCH_DURABILITY_NONE));
  OK(larch_begin(db, 0, &w));
  OK(larch_put(w, "t", &k, &v, 0));
  OK(larch_abort(w));
  OK(larch_begin(db, LARCH_RDONLY, &r));
  EXPECT(larch_get(r, "t", &k, &out), LARCH_NOTFOUND);
  OK(larch_table_len(r, "t", &n));
  CHECK(n == 2);
  OK(larch_abort(r));
  OK(larch_close(db));
}

static void test_default_table_and_durability(int log) {
  larch_db *db = open_new(log);
  {
    /* Reads of the default table before it exists find it empty, and do not create it. */
    larch_txn *w = NULL;
    OK(larch_begin(db, 0, &w));
    larch_val k = V("k"), out;
    EXPECT(larch_get(w, NULL, &k, &out), LARCH_NOTFOUND);
    uint64_t n = 9;
    OK(larch_table_len(w, NULL, &n));
    CHECK(n == 0);
    larch_cursor *c = NULL;
    OK(larch_cursor_open(w, NULL, &c));
    EXPECT(larch_cursor_get(c, &k, &out, LARCH_FIRST), LARCH_NOTFOUND);
    OK(larch_cursor_close(c));
    OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
    larch_stats s;
    OK(larch_stat(db, &s));
    CHECK(s.tables == 0);
  }
  int levels[] = {LARCH_DURABILITY_DEFAULT, LARCH_DURABILITY_IMMEDIATE,
                  LARCH_DURABILITY_BOUNDED, LARCH_DURABILITY_NONE};
  for (int i = 0; i < 4; i++) {
    larch_txn *w = NULL;
    OK(larch_begin(db, 0, &w));
    char key[8];
    snprintf(key, sizeof key, "k%d", i);
    larch_val k = V(key), v = V("v");
    OK(larch_put(w, NULL, &k, &v, 0));
    OK(larch_commit(w, levels[i]));
  }
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  /* An unknown durability: the transaction ends, nothing written. */
  larch_val k = V("never"), v = V("v"), out;
  OK(larch_put(w, NULL, &k, &v, 0));
  EXPECT(larch_commit(w, 77), LARCH_EINVAL);
  EXPECT(larch_abort(w), LARCH_EBADHANDLE);
  OK(larch_sync(db));
  OK(larch_checkpoint(db));
  larch_txn *r = NULL;
  OK(larch_begin(db, LARCH_RDONLY, &r));
  uint64_t n = 0;
  OK(larch_table_len(r, NULL, &n));
  CHECK(n == 4);
  EXPECT(larch_get(r, NULL, &k, &out), LARCH_NOTFOUND);
  larch_val k3 = V("k3");
  OK(larch_get(r, NULL, &k3, &out));
  CHECK(val_is(out, "v"));
  OK(larch_abort(r));
  OK(larch_close(db));
}

static void test_bad_input(void) {
  larch_db *db = open_new(0);
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  larch_val empty = {NULL, 0}, v = V("v"), out;
  /* The empty key is a key like any. */
  OK(larch_put(w, NULL, &empty, &v, 0));
  OK(larch_get(w, NULL, &empty, &out));
  CHECK(val_is(out, "v"));
  size_t big = 1 << 20;
  uint8_t *huge = calloc(big, 1);
  larch_val hk = {huge, big};
  EXPECT(larch_put(w, NULL, &hk, &v, 0), LARCH_EKEYTOOLARGE);
  CHECK(strstr(larch_last_error(), "key") != NULL);
  /* A null pointer with a length. */
  larch_val bad = {NULL, 5};
  EXPECT(larch_put(w, NULL, &bad, &v, 0), LARCH_EINVAL);
  EXPECT(larch_put(w, NULL, NULL, &v, 0), LARCH_EINVAL);
  EXPECT(larch_get(w, NULL, &v, NULL), LARCH_EINVAL);
  /* Table names. */
  EXPECT(larch_table_create(w, ""), LARCH_ETABLENAME);
  EXPECT(larch_table_create(w, NULL), LARCH_EINVAL);
  EXPECT(larch_table_create(w, "\xff\xfe"), LARCH_EINVAL);
  OK(larch_table_create(w, "t"));
  EXPECT(larch_table_create(w, "t"), LARCH_ETABLEEXISTS);
  int created = -1;
  OK(larch_table_ensure(w, "t", &created));
  CHECK(created == 0);
  OK(larch_table_ensure(w, "u", &created));
  CHECK(created == 1);
  EXPECT(larch_table_delete(w, "nope"), LARCH_NOTFOUND);
  OK(larch_table_delete(w, "u"));
  EXPECT(larch_put(w, "u", &v, &v, 0), LARCH_ETABLENOTFOUND);
  /* Nothing bad was written: the transaction goes on. */
  larch_val k = V("k");
  OK(larch_put(w, "t", &k, &v, 0));
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
  larch_txn *r = NULL;
  OK(larch_begin(db, LARCH_RDONLY, &r));
  OK(larch_get(r, "t", &k, &out));
  CHECK(val_is(out, "v"));
  OK(larch_abort(r));
  EXPECT(larch_begin(db, 0x100, &w), LARCH_EINVAL);
  EXPECT(larch_begin(db, 0, NULL), LARCH_EINVAL);
  free(huge);
  OK(larch_close(db));
}

static void test_use_after_end(void) {
  larch_db *db = open_new(1);
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  OK(larch_table_create(w, "t"));
  larch_cursor *c = NULL;
  OK(larch_cursor_open(w, "t", &c));
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
  larch_val k = V("k"), v = V("v"), out;
  /* The transaction ended: every use is a bad handle. */
  EXPECT(larch_put(w, "t", &k, &v, 0), LARCH_EBADHANDLE);
  EXPECT(larch_get(w, "t", &k, &out), LARCH_EBADHANDLE);
  EXPECT(larch_commit(w, LARCH_DURABILITY_DEFAULT), LARCH_EBADHANDLE);
  EXPECT(larch_abort(w), LARCH_EBADHANDLE);
  uint64_t id;
  EXPECT(larch_txn_id(w, &id), LARCH_EBADHANDLE);
  /* Its cursor too, until it is closed (once). */
  EXPECT(larch_cursor_get(c, &k, &v, LARCH_FIRST), LARCH_EBADHANDLE);
  OK(larch_cursor_close(c));
  EXPECT(larch_cursor_close(c), LARCH_EBADHANDLE);
  /* A new transaction reuses the slot; the old handle stays stale. */
  larch_txn *w2 = NULL;
  OK(larch_begin(db, 0, &w2));
  CHECK(w2 != w);
  EXPECT(larch_put(w, "t", &k, &v, 0), LARCH_EBADHANDLE);
  OK(larch_put(w2, "t", &k, &v, 0));
  /* A cursor handle is not a transaction handle. */
  OK(larch_cursor_open(w2, "t", &c));
  EXPECT(larch_abort((larch_txn *)c), LARCH_EBADHANDLE);
  EXPECT(larch_cursor_close((larch_cursor *)w2), LARCH_EBADHANDLE);
  OK(larch_cursor_close(c));
  OK(larch_abort(w2));
  /* NOWAIT while a writer is open. */
  OK(larch_begin(db, 0, &w));
  EXPECT(larch_begin(db, LARCH_NOWAIT, &w2), LARCH_EWRITEBUSY);
  OK(larch_abort(w));
  OK(larch_begin(db, LARCH_NOWAIT, &w2));
  OK(larch_abort(w2));
  OK(larch_close(db));
}

/* ---- cursors ---- */

static void fill_letters(larch_db *db) {
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  OK(larch_table_ensure(w, "t", NULL));
  for (char ch = 'a'; ch <= 'j'; ch++) {
    char key[2] = {ch, 0}, val[3] = {ch, ch, 0};
    larch_val k = V(key), v = V(val);
    OK(larch_put(w, "t", &k, &v, 0));
  }
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
}

/* Walks the cursor and writes the keys it meets into `out` ("" if none). */
static void walk(larch_cursor *c, int first, int step, char *out) {
  larch_val k, v;
  size_t n = 0;
  for (int rc = larch_cursor_get(c, &k, &v, first); rc == LARCH_OK;
       rc = larch_cursor_get(c, &k, &v, step)) {
    CHECK(k.len == 1 && v.len == 2 && v.data[0] == k.data[0]);
    out[n++] = (char)k.data[0];
  }
  out[n] = 0;
}

static void test_cursor_on(larch_txn *t) {
  larch_cursor *c = NULL;
  OK(larch_cursor_open(t, "t", &c));
  char seen[32];
  walk(c, LARCH_FIRST, LARCH_NEXT, seen);
  CHECK(strcmp(seen, "abcdefghij") == 0);
  walk(c, LARCH_LAST, LARCH_PREV, seen);
  CHECK(strcmp(seen, "jihgfedcba") == 0);
  /* Seeks. */
  larch_val k = V("dd"), v;
  OK(larch_cursor_get(c, &k, &v, LARCH_SET_RANGE));
  CHECK(val_is(k, "e") && val_is(v, "ee"));
  k = V("dd");
  EXPECT(larch_cursor_get(c, &k, &v, LARCH_SET_KEY), LARCH_NOTFOUND);
  /* A miss leaves the cursor where it was (on "e"). */
  OK(larch_cursor_get(c, &k, &v, LARCH_GET_CURRENT));
  CHECK(val_is(k, "e"));
  k = V("g");
  OK(larch_cursor_get(c, &k, &v, LARCH_SET_KEY));
  CHECK(val_is(v, "gg"));
  /* Turning round. */
  OK(larch_cursor_get(c, &k, &v, LARCH_NEXT));
  CHECK(val_is(k, "h"));
  OK(larch_cursor_get(c, &k, &v, LARCH_PREV));
  CHECK(val_is(k, "g"));
  OK(larch_cursor_get(c, &k, &v, LARCH_PREV));
  CHECK(val_is(k, "f"));
  OK(larch_cursor_get(c, &k, &v, LARCH_NEXT));
  CHECK(val_is(k, "g"));
  /* Past the end: NOTFOUND, and the cursor stays on the last entry. */
  OK(larch_cursor_get(c, &k, &v, LARCH_LAST));
  EXPECT(larch_cursor_get(c, &k, &v, LARCH_NEXT), LARCH_NOTFOUND);
  OK(larch_cursor_get(c, &k, &v, LARCH_PREV));
  CHECK(val_is(k, "i"));
  k = V("zz");
  EXPECT(larch_cursor_get(c, &k, &v, LARCH_SET_RANGE), LARCH_NOTFOUND);
  /* Bounds [c, g). */
  larch_val lo = V("c"), hi = V("g");
  OK(larch_cursor_bounds(c, &lo, &hi));
  EXPECT(larch_cursor_get(c, &k, &v, LARCH_GET_CURRENT), LARCH_EINVAL);
  walk(c, LARCH_FIRST, LARCH_NEXT, seen);
  CHECK(strcmp(seen, "cdef") == 0);
  walk(c, LARCH_LAST, LARCH_PREV, seen);
  CHECK(strcmp(seen, "fedc") == 0);
  k = V("a");
  OK(larch_cursor_get(c, &k, &v, LARCH_SET_RANGE));
  CHECK(val_is(k, "c"));
  k = V("h");
  EXPECT(larch_cursor_get(c, &k, &v, LARCH_SET_KEY), LARCH_NOTFOUND);
  k = V("b");
  EXPECT(larch_cursor_get(c, &k, &v, LARCH_SET_KEY), LARCH_NOTFOUND);
  /* Only a lower bound; then none. */
  lo = V("i");
  OK(larch_cursor_bounds(c, &lo, NULL));
  walk(c, LARCH_FIRST, LARCH_NEXT, seen);
  CHECK(strcmp(seen, "ij") == 0);
  OK(larch_cursor_bounds(c, NULL, NULL));
  walk(c, LARCH_NEXT, LARCH_NEXT, seen); /* not placed: NEXT starts at the first */
  CHECK(strcmp(seen, "abcdefghij") == 0);
  EXPECT(larch_cursor_get(c, &k, &v, 99), LARCH_EINVAL);
  EXPECT(larch_cursor_get(c, NULL, &v, LARCH_SET_KEY), LARCH_EINVAL);
  /* Key and value may be left out. */
  OK(larch_cursor_get(c, NULL, NULL, LARCH_FIRST));
  OK(larch_cursor_close(c));
  EXPECT(larch_cursor_open(t, "nope", &c), LARCH_ETABLENOTFOUND);
}

static void test_cursors(int log) {
  larch_db *db = open_new(log);
  fill_letters(db);
  larch_txn *t = NULL;
  OK(larch_begin(db, LARCH_RDONLY, &t));
  test_cursor_on(t);
  OK(larch_abort(t));
  OK(larch_begin(db, 0, &t));
  test_cursor_on(t);
  /* In a write transaction the cursor sees the transaction's changes. */
  larch_cursor *c = NULL;
  OK(larch_cursor_open(t, "t", &c));
  larch_val k = V("b"), v;
  OK(larch_delete(t, "t", &k));
  k = V("a");
  OK(larch_cursor_get(c, &k, &v, LARCH_SET_KEY));
  OK(larch_cursor_get(c, &k, &v, LARCH_NEXT));
  CHECK(val_is(k, "c"));
  /* Range deletes. */
  uint64_t deleted = 0;
  larch_val lo = V("d"), hi = V("g");
  OK(larch_delete_range(t, "t", &lo, &hi, &deleted));
  CHECK(deleted == 3);
  OK(larch_cursor_get(c, &k, &v, LARCH_NEXT));
  CHECK(val_is(k, "g"));
  OK(larch_delete_range(t, "t", NULL, NULL, &deleted));
  CHECK(deleted == 6); /* a, c, g, h, i, j */
  EXPECT(larch_cursor_get(c, &k, &v, LARCH_FIRST), LARCH_NOTFOUND);
  OK(larch_cursor_close(c));
  OK(larch_abort(t));
  OK(larch_close(db));
}

/* ---- savepoints ---- */

static void test_savepoints(int log) {
  larch_db *db = open_new(log);
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  larch_val a = V("a"), b = V("b"), c = V("c"), v = V("1"), out;
  OK(larch_put(w, NULL, &a, &v, 0));
  uint64_t sp1 = 0, sp2 = 0;
  OK(larch_savepoint(w, &sp1));
  OK(larch_put(w, NULL, &b, &v, 0));
  OK(larch_savepoint(w, &sp2));
  OK(larch_put(w, NULL, &c, &v, 0));
  OK(larch_rollback_to(w, sp2));
  EXPECT(larch_get(w, NULL, &c, &out), LARCH_NOTFOUND);
  OK(larch_get(w, NULL, &b, &out));
  OK(larch_rollback_to(w, sp1));
  EXPECT(larch_get(w, NULL, &b, &out), LARCH_NOTFOUND);
  /* sp2 was rolled past. */
  EXPECT(larch_rollback_to(w, sp2), LARCH_ESAVEPOINT);
  EXPECT(larch_release(w, 12345), LARCH_ESAVEPOINT);
  OK(larch_put(w, NULL, &c, &v, 0));
  OK(larch_release(w, sp1));
  EXPECT(larch_rollback_to(w, sp1), LARCH_ESAVEPOINT);
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
  larch_txn *r = NULL;
  OK(larch_begin(db, LARCH_RDONLY, &r));
  OK(larch_get(r, NULL, &a, &out));
  OK(larch_get(r, NULL, &c, &out));
  EXPECT(larch_get(r, NULL, &b, &out), LARCH_NOTFOUND);
  uint64_t sp;
  EXPECT(larch_savepoint(r, &sp), LARCH_EREADONLY);
  OK(larch_abort(r));
  OK(larch_close(db));
}

/* ---- tables listing ---- */

struct names {
  char all[256];
  int count;
  int stop_after;
};

static int collect(void *ctx, const char *name, size_t len) {
  struct names *n = ctx;
  strncat(n->all, name, len);
  strcat(n->all, ",");
  n->count++;
  return n->count == n->stop_after ? 7 : 0;
}

static void test_list_tables(void) {
  larch_db *db = open_new(0);
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  OK(larch_table_create(w, "beta"));
  OK(larch_table_create(w, "alpha"));
  struct names n = {{0}, 0, 0};
  OK(larch_list_tables(w, collect, &n));
  CHECK(strcmp(n.all, "alpha,beta,") == 0);
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
  OK(larch_begin(db, LARCH_RDONLY, &w));
  struct names m = {{0}, 0, 1};
  EXPECT(larch_list_tables(w, collect, &m), 7);
  CHECK(m.count == 1);
  EXPECT(larch_list_tables(w, NULL, &m), LARCH_EINVAL);
  OK(larch_abort(w));
  OK(larch_close(db));
}

/* ---- the last error describes the last failing call ---- */

static void test_last_error(void) {
  larch_db *db = open_new(0);
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  OK(larch_table_create(w, "alpha"));
  /* A failure sets the message. */
  EXPECT(larch_table_create(w, ""), LARCH_ETABLENAME);
  CHECK(strstr(larch_last_error(), "table name") != NULL);
  /* Calls that succeed, or answer "not found", leave it: it can be read after cleaning up. */
  larch_val k = V("absent"), v;
  EXPECT(larch_get(w, "alpha", &k, &v), LARCH_NOTFOUND);
  CHECK(strstr(larch_last_error(), "table name") != NULL);
  /* A callback that stops the listing with an error code: the call fails, with a message of
   * its own rather than the earlier one. */
  struct names n = {{0}, 0, 1};
  EXPECT(larch_list_tables(w, collect, &n), 7);
  CHECK(strstr(larch_last_error(), "callback returned 7") != NULL);
  CHECK(strstr(larch_last_error(), "table name") == NULL);
  /* A failure of another kind replaces it. */
  EXPECT(larch_table_create(w, "alpha"), LARCH_ETABLEEXISTS);
  CHECK(strstr(larch_last_error(), "alpha") != NULL);
  CHECK(strstr(larch_last_error(), "callback") == NULL);
  OK(larch_abort(w));
  /* A handle used after it was freed. */
  EXPECT(larch_abort(w), LARCH_EBADHANDLE);
  CHECK(strstr(larch_last_error(), "transaction") != NULL);
  OK(larch_close(db));
}

/* ---- stats, verify, copy, compact ---- */

static void test_maintenance(int log) {
  larch_db *db = open_new(log);
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  OK(larch_table_create(w, "t"));
  char key[16], val[200];
  memset(val, 'x', sizeof val - 1);
  val[sizeof val - 1] = 0;
  for (int i = 0; i < 2000; i++) {
    snprintf(key, sizeof key, "key%06d", i);
    larch_val k = V(key), v = V(val);
    OK(larch_put(w, "t", &k, &v, 0));
  }
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
  OK(larch_begin(db, 0, &w));
  uint64_t gone = 0;
  OK(larch_delete_range(w, "t", NULL, NULL, &gone));
  CHECK(gone == 2000);
  larch_val k = V("left"), v = V("over");
  OK(larch_put(w, "t", &k, &v, 0));
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));

  larch_stats s;
  OK(larch_stat(db, &s));
  CHECK(s.page_bytes == 4096);
  CHECK(s.entries == 1 && s.tables >= 1 && s.commits == 2 && s.txn > 0);
  CHECK(s.file_bytes >= s.page_count * s.page_bytes / 2);
  EXPECT(larch_stat(db, NULL), LARCH_EINVAL);
  larch_verify_report rep;
  OK(larch_verify(db, 0, &rep));
  /* Verify checks the tree: with the log, the last checkpoint's. */
  CHECK(rep.problems == 0);
  OK(larch_checkpoint(db));
  OK(larch_verify(db, 0, &rep));
  CHECK(rep.problems == 0 && rep.entries == 1);
  OK(larch_verify(db, 1, NULL));

  char copy[300];
  db_path(copy, sizeof copy);
  larch_copied cp;
  OK(larch_copy(db, copy, &cp));
  CHECK(cp.entries == 1 && cp.bytes > 0);
  /* The copy's file exists: a second copy there is refused. */
  EXPECT(larch_copy(db, copy, NULL), LARCH_EIO);
  larch_compacted cm;
  OK(larch_compact(db, &cm));
  CHECK(cm.data_bytes_after <= cm.data_bytes_before);
  OK(larch_close(db));

  larch_db *c = NULL;
  OK(larch_open(copy, NULL, &c));
  larch_txn *r = NULL;
  OK(larch_begin(c, LARCH_RDONLY, &r));
  larch_val out;
  OK(larch_get(r, "t", &k, &out));
  CHECK(val_is(out, "over"));
  OK(larch_abort(r));
  OK(larch_close(c));
}

/* The memory budget and the log's room: a small budget makes checkpoints of what it holds
   (more of them than the default's for the same writes), a room makes fewer of them durable,
   and neither loses a record, before or after a reopen. */
static uint64_t write_many(larch_db *db, int n) {
  char key[32], val[1024];
  memset(val, 'v', sizeof val - 1);
  val[sizeof val - 1] = 0;
  for (int i = 0; i < n; i++) {
    larch_txn *w = NULL;
    OK(larch_begin(db, 0, &w));
    snprintf(key, sizeof key, "k%08d", (i * 7919) % n);
    snprintf(val, 16, "%015d", i);
    larch_val k = V(key), v = {(const uint8_t *)val, sizeof val};
    OK(larch_put(w, NULL, &k, &v, 0));
    OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
  }
  larch_stats s;
  OK(larch_stat(db, &s));
  CHECK(s.entries == (uint64_t)n);
  CHECK(s.durable_checkpoints <= s.checkpoints);
  return s.checkpoints;
}

static void check_many(larch_db *db, int n) {
  larch_txn *r = NULL;
  OK(larch_begin(db, LARCH_RDONLY, &r));
  char key[32], want[16];
  int bad = 0;
  for (int i = 0; i < n; i++) {
    snprintf(key, sizeof key, "k%08d", (i * 7919) % n);
    snprintf(want, sizeof want, "%015d", i);
    larch_val k = V(key), out;
    if (larch_get(r, NULL, &k, &out) != LARCH_OK || out.len != 1024 ||
        memcmp(out.data, want, 15) != 0)
      bad++;
  }
  CHECK(bad == 0);
  OK(larch_abort(r));
}

static larch_db *open_with(const char *path, uint64_t budget, uint64_t room) {
  larch_options o;
  larch_options_init(&o);
  o.durability = LARCH_DURABILITY_NONE;
  o.memory_budget = budget;
  o.log_room_bytes = room;
  larch_db *db = NULL;
  OK(larch_open(path, &o, &db));
  return db;
}

static void test_budget_and_room(void) {
  const int n = 6000; /* 6 MiB of values, 6000 commits */
  uint64_t ckpt[3];
  const uint64_t budgets[3] = {0, 4 << 20, 4 << 20};
  const uint64_t rooms[3] = {0, 0, 64 << 20};
  for (int c = 0; c < 3; c++) {
    char path[300];
    db_path(path, sizeof path);
    larch_db *db = open_with(path, budgets[c], rooms[c]);
    ckpt[c] = write_many(db, n);
    check_many(db, n);
    OK(larch_close(db));
    db = open_with(path, budgets[c], rooms[c]);
    check_many(db, n);
    OK(larch_close(db));
  }
  printf("budget and room: checkpoints %llu (default), %llu (4 MiB budget), %llu (and a room)\n",
         (unsigned long long)ckpt[0], (unsigned long long)ckpt[1], (unsigned long long)ckpt[2]);
  /* 4 MiB holds a fraction of the 6 MiB written: checkpoints come from the budget. */
  CHECK(ckpt[1] > ckpt[0]);
  CHECK(ckpt[2] > ckpt[0]);
}

/* The tree's pages in frames of the engine's own, through reopens with and without them. */
static void test_frames(void) {
  const int n = 3000;
  char path[300];
  db_path(path, sizeof path);
  larch_options o;
  larch_options_init(&o);
  o.durability = LARCH_DURABILITY_NONE;
  o.frames_bytes = 64 << 20;
  larch_db *db = NULL;
  OK(larch_open(path, &o, &db));
  write_many(db, n);
  check_many(db, n);
  OK(larch_close(db));
  OK(larch_open(path, &o, &db));
  check_many(db, n);
  OK(larch_close(db));
  o.frames_bytes = LARCH_FRAMES_OFF;
  OK(larch_open(path, &o, &db));
  check_many(db, n);
  OK(larch_close(db));
}

/* A damaged page is reported by verify and by reads, never a crash. */
static void test_corruption(void) {
  char path[300];
  db_path(path, sizeof path);
  larch_options o;
  larch_options_init(&o);
  o.compact_on_close = 0;
  /* Every page read checked, also through the memory map (off by default). */
  o.verify_checksums = 1;
  larch_db *db = NULL;
  OK(larch_open(path, &o, &db));
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  char key[16], val[100];
  memset(val, 'v', sizeof val - 1);
  val[sizeof val - 1] = 0;
  for (int i = 0; i < 3000; i++) {
    snprintf(key, sizeof key, "k%06d", i);
    larch_val k = V(key), v = V(val);
    OK(larch_put(w, NULL, &k, &v, 0));
  }
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
  OK(larch_close(db));
  /* Flip bytes in the middle of every page past the first few. */
  FILE *f = fopen(path, "r+b");
  struct stat st;
  stat(path, &st);
  for (long off = 8 * 4096 + 2000; off < st.st_size; off += 4096) {
    fseek(f, off, SEEK_SET);
    fputc(0x5a, f);
  }
  fclose(f);
  int rc = larch_open(path, &o, &db);
  if (rc == LARCH_OK) {
    /* Found damage is a report with problems, or the error of the page that stopped it. */
    EXPECT(larch_verify(db, 0, NULL), LARCH_ECORRUPTED);
    CHECK(strstr(larch_last_error(), "page") != NULL);
    larch_txn *r = NULL;
    OK(larch_begin(db, LARCH_RDONLY, &r));
    larch_cursor *c = NULL;
    OK(larch_cursor_open(r, NULL, &c));
    larch_val k, v;
    int steps = 0;
    for (rc = larch_cursor_get(c, &k, &v, LARCH_FIRST); rc == LARCH_OK;
         rc = larch_cursor_get(c, &k, &v, LARCH_NEXT))
      steps++;
    CHECK(rc == LARCH_ECORRUPTED);
    OK(larch_cursor_close(c));
    OK(larch_abort(r));
    OK(larch_close(db));
  } else {
    CHECK(rc == LARCH_ECORRUPTED);
  }
}

/* ---- a reader on another thread while the writer commits ---- */

struct reader_arg {
  larch_db *db;
  int rounds;
  int bad;
};

/* Each snapshot holds keys 0..n-1 with the value n (written in one transaction each): a
 * reader must never see a mix. */
static void *reader_main(void *p) {
  struct reader_arg *a = p;
  for (int i = 0; i < a->rounds; i++) {
    larch_txn *r = NULL;
    if (larch_begin(a->db, LARCH_RDONLY, &r) != LARCH_OK) {
      a->bad++;
      continue;
    }
    larch_cursor *c = NULL;
    if (larch_cursor_open(r, "t", &c) == LARCH_OK) {
      larch_val k, v;
      long first = -1;
      uint64_t n = 0, len = 0;
      for (int rc = larch_cursor_get(c, &k, &v, LARCH_FIRST); rc == LARCH_OK;
           rc = larch_cursor_get(c, &k, &v, LARCH_NEXT)) {
        char buf[32] = {0};
        memcpy(buf, v.data, v.len < 31 ? v.len : 31);
        long val = atol(buf);
        if (first < 0) first = val;
        if (val != first) a->bad++;
        n++;
      }
      larch_table_len(r, "t", &len);
      if (first >= 0 && (uint64_t)first != n) a->bad++;
      if (len != n) a->bad++;
      larch_cursor_close(c);
    }
    larch_abort(r);
  }
  return NULL;
}

static void test_reader_thread(int log) {
  larch_db *db = open_new(log);
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  OK(larch_table_create(w, "t"));
  OK(larch_commit(w, LARCH_DURABILITY_DEFAULT));
  struct reader_arg a = {db, 200, 0};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, reader_main, &a) == 0);
  for (int n = 1; n <= 60; n++) {
    OK(larch_begin(db, 0, &w));
    char key[16], val[16];
    snprintf(val, sizeof val, "%d", n);
    for (int i = 0; i < n; i++) {
      snprintf(key, sizeof key, "%04d", i);
      larch_val k = V(key), v = V(val);
      OK(larch_put(w, "t", &k, &v, 0));
    }
    OK(larch_commit(w, n % 2 ? LARCH_DURABILITY_NONE : LARCH_DURABILITY_IMMEDIATE));
  }
  CHECK(pthread_join(th, NULL) == 0);
  CHECK(a.bad == 0);
  /* The reader's transactions all ended: the database closes. */
  OK(larch_close(db));
}

/* ---- renew ---- */

static void test_renew(void) {
  larch_db *db = open_new(0);
  put_one(db, NULL, "k", "1");
  larch_txn *r = NULL;
  OK(larch_begin(db, LARCH_RDONLY, &r));
  larch_cursor *c = NULL;
  OK(larch_cursor_open(r, NULL, &c));
  OK(larch_cursor_get(c, NULL, NULL, LARCH_FIRST));
  put_one(db, NULL, "k", "2");
  larch_val k = V("k"), out;
  OK(larch_get(r, NULL, &k, &out));
  CHECK(val_is(out, "1"));
  OK(larch_txn_renew(r));
  OK(larch_get(r, NULL, &k, &out));
  CHECK(val_is(out, "2"));
  /* The cursor must be placed again. */
  EXPECT(larch_cursor_get(c, &k, &out, LARCH_GET_CURRENT), LARCH_EINVAL);
  OK(larch_cursor_get(c, &k, &out, LARCH_FIRST));
  CHECK(val_is(out, "2"));
  OK(larch_cursor_close(c));
  OK(larch_abort(r));
  larch_txn *w = NULL;
  OK(larch_begin(db, 0, &w));
  EXPECT(larch_txn_renew(w), LARCH_EINVAL);
  OK(larch_abort(w));
  OK(larch_close(db));
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(base_dir, sizeof base_dir, "%s/larch-c-test-XXXXXX", tmp ? tmp : "/tmp");
  if (!mkdtemp(base_dir)) {
    perror("mkdtemp");
    return 2;
  }
  test_codes();
  test_open_errors();
  test_close();
  test_second_writer();
  for (int log = 0; log <= 1; log++) {
    test_put_get_delete(log);
    test_default_table_and_durability(log);
    test_cursors(log);
    test_savepoints(log);
    test_maintenance(log);
    test_reader_thread(log);
  }
  test_bad_input();
  test_use_after_end();
  test_list_tables();
  test_last_error();
  test_corruption();
  test_renew();
  test_budget_and_room();
  test_frames();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", base_dir);
  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
