/* larch.h: the C API of Larch, an embedded, persistent, ACID key-value engine.
 *
 * Generated from crates/larch-c/src/lib.rs by cbindgen; do not edit by hand
 * (LARCH_BLESS=1 cargo test -p larch-c --test header rewrites it).
 * Design and rules: docs/design/c-api.md. Link with -llarch (liblarch.so or liblarch.a;
 * the static library also needs -lpthread -ldl -lm), or with the flags of the larch.pc the
 * build writes beside the libraries: pkg-config --cflags --libs target/release/larch.pc */

#ifndef LARCH_H
#define LARCH_H

#include <stdint.h>
#include <stddef.h>

// Success.
#define LARCH_OK 0

// Not an error: the key is not there, or the cursor has no entry in that direction.
#define LARCH_NOTFOUND 1

// Not an error: `LARCH_NOOVERWRITE` and the key is there (nothing was written).
#define LARCH_KEYEXIST 2

// An argument is not valid: a null pointer where one is needed, a name that is not UTF-8,
// an unknown flag or cursor operation.
#define LARCH_EINVAL 10

// The handle was freed (a transaction after its commit or abort, a cursor after its close or
// its transaction's end, a database after its close), or is of another kind.
#define LARCH_EBADHANDLE 11

// `larch_close` with transactions still open on the database (nothing was closed).
#define LARCH_EBUSY 12

// An I/O error of the operating system; the message names the operation and the path.
#define LARCH_EIO 13

// The disk is full (`ENOSPC`, `EDQUOT`): nothing committed is lost.
#define LARCH_EDISKFULL 14

// The database is damaged: a page or log record failed its checks, an open found damage it
// cannot get past without losing acknowledged commits (nothing was changed; `larch recover`
// opens the newest intact state), or the lock file beside it is not a Larch lock file.
#define LARCH_ECORRUPTED 15

// The file is not a Larch database, or of a format version this library cannot read.
#define LARCH_ENOTADB 16

// Another process, or another handle in this process, holds the database open for writing.
#define LARCH_ELOCKED 17

// `LARCH_NOWAIT` and another write transaction is open; or this thread's own write
// transaction on the database is still open, which a second `larch_begin` would wait for
// forever.
#define LARCH_EWRITEBUSY 18

// A write to a read-only database handle, or in a read transaction.
#define LARCH_EREADONLY 19

// The key is longer than the engine's limit for the database's page size: a quarter page less
// some bytes (1000 bytes at 4096-byte pages). The empty key is valid.
#define LARCH_EKEYTOOLARGE 20

// The value is longer than the engine's limit (1073741824 bytes: 1 GiB).
#define LARCH_EVALUETOOLARGE 21

// No table of that name.
#define LARCH_ETABLENOTFOUND 22

// A table of that name exists already.
#define LARCH_ETABLEEXISTS 23

// The table name is empty or longer than 255 bytes.
#define LARCH_ETABLENAME 24

// The options are not valid (the message says which).
#define LARCH_EOPTIONS 25

// A write to the file failed earlier; the handle accepts no more writes (reopen it).
#define LARCH_EPOISONED 26

// `LARCH_APPEND` with a key not greater than the table's last.
#define LARCH_EAPPEND 27

// An earlier call in this write transaction failed part way; it can only be aborted.
#define LARCH_ETXNFAILED 28

// The file has reached the largest size its page numbers can address.
#define LARCH_EFULL 29

// The lock file's reader table has no free slot.
#define LARCH_EREADERSFULL 30

// The table was created with other key or value types, or its bytes do not decode as them
// (typed tables of the Rust API).
#define LARCH_ETYPE 31

// The savepoint was released, rolled past, or is another transaction's.
#define LARCH_ESAVEPOINT 32

// The engine panicked; the message says where. The handle involved may be unusable.
#define LARCH_EPANIC 33

// A failure of the engine's own invariants (a bug); the message says which.
#define LARCH_EINTERNAL 34

// `larch_begin`: a read transaction (a snapshot; never blocks, never blocks the writer).
#define LARCH_RDONLY 1

// `larch_begin`: a write transaction that fails with `LARCH_EWRITEBUSY` instead of waiting
// for the one open.
#define LARCH_NOWAIT 2

// `larch_put`: write only if the key is not there; `LARCH_KEYEXIST` otherwise.
#define LARCH_NOOVERWRITE 1

// `larch_put`: the key is greater than every key in the table (a sorted load; faster);
// `LARCH_EAPPEND` otherwise.
#define LARCH_APPEND 2

// `larch_commit`: the database's durability (`larch_options.durability`).
#define LARCH_DURABILITY_DEFAULT 0

// Durable when the commit returns (one sync, shared by the commits waiting at once).
#define LARCH_DURABILITY_IMMEDIATE 1

// Durable within a bound of time and bytes (with the log), without the committer waiting;
// without the log, as `LARCH_DURABILITY_NONE`.
#define LARCH_DURABILITY_BOUNDED 2

// Never synced by the commit; a crash may lose it (and every later one), never corrupts.
#define LARCH_DURABILITY_NONE 3

// The first entry (within the cursor's bounds).
#define LARCH_FIRST 0

// The last entry (within the cursor's bounds).
#define LARCH_LAST 1

// The entry after the cursor's (the first, on a cursor not placed yet).
#define LARCH_NEXT 2

// The entry before the cursor's (the last, on a cursor not placed yet).
#define LARCH_PREV 3

// The entry whose key is `*key` exactly.
#define LARCH_SET_KEY 4

// The first entry whose key is at or after `*key`.
#define LARCH_SET_RANGE 5

// The cursor's entry again.
#define LARCH_GET_CURRENT 6

// `larch_options::frames_bytes` for no frames: the data file read through its mapping.
#define LARCH_FRAMES_OFF UINT64_MAX

// A cursor handle (opaque).
typedef struct larch_cursor larch_cursor;

// A database handle (opaque).
typedef struct larch_db larch_db;

// A transaction handle (opaque).
typedef struct larch_txn larch_txn;

// Options of `larch_open`. Fill with `larch_options_init`, then change fields.
typedef struct larch_options {
  // `sizeof(larch_options)`, set by `larch_options_init`: a library of a later version
  // reads only the fields a caller built against an earlier header knows.
  uint32_t struct_bytes;
  // Page size of a new database: a power of two from 4096 to 65536; 0 for the default (4096).
  // Ignored when the file exists (its own page size is used).
  uint32_t page_bytes;
  // Non-zero: open for reading only (several processes may; beside one writer). Zero (the
  // default): open for reading and writing.
  int read_only;
  // Non-zero (the default): create the file if it does not exist.
  int create;
  // Non-zero (the default): commit through a write-ahead log beside the file (small commits
  // cost a log append; pages are written at checkpoints). Zero: every commit writes pages.
  int log;
  // The durability of `larch_commit(txn, LARCH_DURABILITY_DEFAULT)`:
  // `LARCH_DURABILITY_IMMEDIATE` (the default), `_BOUNDED` or `_NONE`.
  int durability;
  // Non-zero: every page read is checked against its checksum, also through the memory map.
  // Zero (the default): pages are checked when the file is opened (meta and free-space
  // pages), by `larch_verify`, and by buffered reads (once per page per snapshot).
  int verify_checksums;
  // Non-zero (the default): compact the file when the last handle closes it.
  int compact_on_close;
  // With the log: bytes of log between checkpoints (at least); 0 for the default.
  uint64_t checkpoint_bytes;
  // With the log: the memory, in bytes, the handle may hold for the writes its tree does
  // not have yet, beyond which the writer is slowed and then waits for a checkpoint; 0 for
  // the default (a quarter of the memory the process may use beyond 64 MiB: its cgroup's
  // limit or the machine's memory). Set it where the process shares that memory with more
  // than the engine. At least 4 MiB.
  uint64_t memory_budget;
  // With the log: bytes the log keeps as a room of its own, so that checkpoints are made
  // durable only when that room runs short; 0 for the default (the room the checkpoints
  // call for, which keeps the open files near the data's size). Raised, small random
  // writes run faster for that much more disk while the database is open.
  uint64_t log_room_bytes;
  // How much of the data file a writing handle may keep in memory of its own (frames),
  // in bytes; 0, the default: the engine's, half of the memory the process may use beyond
  // 64 MiB; `LARCH_FRAMES_OFF`: none, the file read through its mapping of the page cache
  // (the Rust API's `Options::frames_bytes`). At most that half, whatever is asked.
  uint64_t frames_bytes;
  // Zero (as `larch_options_init` leaves it): room for options a later library adds
  // without changing the struct's size, each meaning its default at zero. Non-zero is
  // refused (`LARCH_EINVAL`): an option this library does not know.
  uint64_t reserved[5];
} larch_options;

// `larch_stats`' figures (see the Rust API's `Stats` for each one's exact meaning).
typedef struct larch_stats {
  // Bytes per page.
  uint32_t page_bytes;
  // Depth of the deepest table's tree.
  uint32_t depth;
  // The commit whose tree the page figures describe: the newest, or with the log the
  // last checkpoint. (The entry counts are the newest commit's either way.)
  uint64_t txn;
  // Pages in the file.
  uint64_t page_count;
  // Bytes of the data file.
  uint64_t file_bytes;
  // Branch pages of every table.
  uint64_t branch_pages;
  // Leaf pages of every table.
  uint64_t leaf_pages;
  // Overflow pages (large values).
  uint64_t overflow_pages;
  // Pages holding the free-space record.
  uint64_t freelist_pages;
  // Free pages, reusable now.
  uint64_t free_pages;
  // Pages freed that a reader may still reach.
  uint64_t pending_pages;
  // Entries in every table.
  uint64_t entries;
  // Tables.
  uint64_t tables;
  // Read transactions open on this handle.
  uint64_t readers;
  // Read-only handles of other processes registered in the lock file.
  uint64_t other_readers;
  // The oldest snapshot a live reader holds; 0 if none.
  uint64_t oldest_reader;
  // Of the pending pages, those the oldest reader keeps from reuse.
  uint64_t oldest_reader_pages;
  // Commits that succeeded on this handle since it was opened.
  uint64_t commits;
  // Commits that failed.
  uint64_t failed_commits;
  // Write transactions aborted.
  uint64_t aborts;
  // Commits that went to the log only.
  uint64_t logged_commits;
  // Commits that wrote pages.
  uint64_t page_commits;
  // Checkpoints written.
  uint64_t checkpoints;
  // Syncs of the log for commits.
  uint64_t log_syncs;
  // Microseconds write transactions were held back so that checkpoints keep up.
  uint64_t paced_micros;
  // Write transactions that waited for a checkpoint to give back room in the log.
  uint64_t log_full_waits;
  // Microseconds those waits took.
  uint64_t log_full_wait_micros;
  // Of the checkpoints, the ones made durable as they were written (the others are made
  // durable by a later one; see `larch_options.log_room_bytes`).
  uint64_t durable_checkpoints;
} larch_stats;

// `larch_verify`'s report.
typedef struct larch_verify_report {
  // The commit verified.
  uint64_t txn;
  // Pages in the file.
  uint64_t page_count;
  // Pages read and checked.
  uint64_t pages_checked;
  // Tables.
  uint64_t tables;
  // Entries.
  uint64_t entries;
  // Free pages.
  uint64_t free_pages;
  // Pending pages.
  uint64_t pending_pages;
  // Problems found (0: the database is sound); `larch_last_error` describes the first.
  uint64_t problems;
} larch_verify_report;

// `larch_copy`'s figures.
typedef struct larch_copied {
  // The commit copied.
  uint64_t txn;
  // Tables copied.
  uint64_t tables;
  // Entries copied.
  uint64_t entries;
  // Bytes of the copy.
  uint64_t bytes;
} larch_copied;

// `larch_compact`'s figures.
typedef struct larch_compacted {
  // Data file bytes before.
  uint64_t data_bytes_before;
  // Data file bytes after.
  uint64_t data_bytes_after;
  // Log file bytes before.
  uint64_t log_bytes_before;
  // Log file bytes after.
  uint64_t log_bytes_after;
  // Non-zero if pages were moved.
  int moved;
} larch_compacted;

// `larch_list_tables`' callback: called with each table's name (not NUL-terminated) and
// `ctx`; a non-zero return stops the listing and is returned by `larch_list_tables`.
typedef int (*larch_table_fn)(void *ctx, const char *name, size_t len);

// A byte string: a key, or a value. What the library returns points into the database's
// snapshot (no copy) and is valid until the transaction ends; in a write transaction, until
// its next change.
typedef struct larch_val {
  // The bytes (may be null when `len` is 0).
  const uint8_t *data;
  // How many.
  size_t len;
} larch_val;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The message of the last call on this thread that failed (returned a code other than
// `LARCH_OK`, `LARCH_NOTFOUND` and `LARCH_KEYEXIST`), or "" if none did. Every call that fails
// sets it, so it describes the last failure and never an earlier one; calls that succeed
// leave it as it is (as `errno`), so that it can still be read after cleaning up (an abort, a
// close). Valid until the next failing call on this thread; copy it to keep it.
const char *larch_last_error(void);

// A fixed description of a code (`LARCH_OK`, `LARCH_NOTFOUND`, ... ); never null.
const char *larch_strerror(int code);

// The library's version, as "major.minor.patch".
const char *larch_version(void);

// Fills `*options` with the defaults (and `struct_bytes`): the engine's, those of
// `Options::default()` in the Rust API.
//
// # Safety
// `options` is null (nothing is done) or points to a `larch_options`.
void larch_options_init(struct larch_options *options);

// Opens (or creates) the database at `path` with `options` (null: the defaults) and stores
// its handle in `*db`. Several handles may be open on one file in one process only if all
// but one are read-only.
//
// # Safety
// `path` is a NUL-terminated string; `options` is null or points to options filled by
// `larch_options_init`; `db` points to a place for the handle.
int larch_open(const char *path, const struct larch_options *options, struct larch_db **db);

// Closes the database: its files are synced as its durability asks and closed (compacted
// first if `compact_on_close`). `LARCH_EBUSY` (and nothing closed) while transactions are
// open on it: end them first. A closed handle is `LARCH_EBADHANDLE` from then on.
int larch_close(struct larch_db *db);

// Writes the pages changed since the last checkpoint (with the log; nothing to do without).
int larch_checkpoint(struct larch_db *db);

// Makes every commit so far durable.
int larch_sync(struct larch_db *db);

// Figures about the database into `*stats`.
//
// # Safety
// `stats` points to a `larch_stats`.
int larch_stat(struct larch_db *db, struct larch_stats *stats);

// Checks every page reachable from the newest commit (`all` non-zero: and every page of the
// file, free ones included) and stores the figures in `*report` (may be null). Returns
// `LARCH_OK` if the database is sound, `LARCH_ECORRUPTED` if problems were found (the
// report counts them; `larch_last_error` describes the first).
//
// # Safety
// `report` is null or points to a `larch_verify_report`.
int larch_verify(struct larch_db *db, int all, struct larch_verify_report *report);

// Writes a compact copy of the newest commit to a new file at `path` (a consistent snapshot;
// writers go on meanwhile), and its figures to `*copied` (may be null).
//
// # Safety
// `path` is a NUL-terminated string; `copied` is null or points to a `larch_copied`.
int larch_copy(struct larch_db *db, const char *path, struct larch_copied *copied);

// Compacts the database in place (moves pages down and gives the file's free end back), and
// stores the figures in `*compacted` (may be null). Waits for the write lock.
//
// # Safety
// `compacted` is null or points to a `larch_compacted`.
int larch_compact(struct larch_db *db, struct larch_compacted *compacted);

// Begins a transaction on `db` and stores its handle in `*txn`: a read transaction with
// `LARCH_RDONLY` (a snapshot of the newest commit), else the write transaction (one at a
// time per database: waits for the open one, or with `LARCH_NOWAIT` fails with
// `LARCH_EWRITEBUSY`). End it with `larch_commit` or `larch_abort`, on the thread that uses
// it.
//
// # Safety
// `txn` points to a place for the handle.
int larch_begin(struct larch_db *db, unsigned int flags, struct larch_txn **txn);

// Commits a write transaction with `durability` (`LARCH_DURABILITY_DEFAULT`: the database's),
// or ends a read transaction. The handle is freed whatever the outcome: after a failed
// commit nothing of the transaction was written.
int larch_commit(struct larch_txn *txn, int durability_level);

// Ends a transaction without writing anything, and frees its handle.
int larch_abort(struct larch_txn *txn);

// The id of the commit the transaction sees (a write transaction: the one it will be).
//
// # Safety
// `id` points to a `uint64_t`.
int larch_txn_id(struct larch_txn *txn, uint64_t *id);

// Moves a read transaction to the newest commit (cheaper than ending it and beginning
// another). Its cursors must be placed again; values read before are no longer valid.
int larch_txn_renew(struct larch_txn *txn);

// Creates table `name` in a write transaction (`LARCH_ETABLEEXISTS` if it exists).
//
// # Safety
// `table` is a NUL-terminated string.
int larch_table_create(struct larch_txn *txn, const char *table);

// Creates table `name` unless it exists; `*created` (may be null) says whether it did.
//
// # Safety
// `table` is a NUL-terminated string; `created` is null or points to an `int`.
int larch_table_ensure(struct larch_txn *txn, const char *table, int *created);

// Deletes table `name` and everything in it; `LARCH_NOTFOUND` if there is none.
//
// # Safety
// `table` is a NUL-terminated string.
int larch_table_delete(struct larch_txn *txn, const char *table);

// Calls `f(ctx, name, len)` for each table, in name order. A non-zero return from `f` stops
// the listing and is returned (`larch_last_error` then says which table it stopped at).
//
// # Safety
// `f` is a function that may be called with `ctx`.
int larch_list_tables(struct larch_txn *txn, larch_table_fn f, void *ctx);

// Entries in table `name` (null: the default table), as the transaction sees them.
//
// # Safety
// `table` is null or a NUL-terminated string; `count` points to a `uint64_t`.
int larch_table_len(struct larch_txn *txn, const char *table, uint64_t *count);

// Looks `key` up in table `table` (null: the default table). Found: `LARCH_OK` and `*value`
// points to the value in the snapshot (valid until the transaction ends; in a write
// transaction, until its next change). Not found: `LARCH_NOTFOUND`.
//
// # Safety
// `table` is null or a NUL-terminated string; `key` points to a `larch_val` describing
// readable bytes; `value` points to a `larch_val`.
int larch_get(struct larch_txn *txn,
              const char *table,
              const struct larch_val *key,
              struct larch_val *value);

// Writes `key` -> `value` in table `table` (null: the default table) in a write
// transaction. `flags`: 0, `LARCH_NOOVERWRITE` (write only a new key; `LARCH_KEYEXIST` if it
// is there), `LARCH_APPEND` (the key is greater than every key in the table).
//
// # Safety
// `table` is null or a NUL-terminated string; `key` and `value` point to `larch_val`s
// describing readable bytes.
int larch_put(struct larch_txn *txn,
              const char *table,
              const struct larch_val *key,
              const struct larch_val *value,
              unsigned int flags);

// Deletes `key` from table `table` (null: the default table); `LARCH_NOTFOUND` if it was not
// there.
//
// # Safety
// `table` is null or a NUL-terminated string; `key` points to a `larch_val` describing
// readable bytes.
int larch_delete(struct larch_txn *txn, const char *table, const struct larch_val *key);

// Deletes every key from `start` (inclusive; null: the first) to `end` (exclusive; null: past
// the last) in table `table` (null: the default table); `*deleted` (may be null) is how
// many.
//
// # Safety
// `table` is null or a NUL-terminated string; `start` and `end` are null or point to
// `larch_val`s describing readable bytes; `deleted` is null or points to a `uint64_t`.
int larch_delete_range(struct larch_txn *txn,
                       const char *table,
                       const struct larch_val *start,
                       const struct larch_val *end,
                       uint64_t *deleted);

// Marks the write transaction's state now; `*savepoint` is its number, for
// `larch_rollback_to` and `larch_release`. Savepoints nest.
//
// # Safety
// `savepoint` points to a `uint64_t`.
int larch_savepoint(struct larch_txn *txn, uint64_t *savepoint);

// Undoes every change the transaction made since savepoint `savepoint`, which stays; later
// savepoints end.
int larch_rollback_to(struct larch_txn *txn, uint64_t savepoint);

// Ends savepoint `savepoint` and every later one, keeping their changes.
int larch_release(struct larch_txn *txn, uint64_t savepoint);

// Opens a cursor on table `table` (null: the default table) in `txn`, not placed yet, and
// stores its handle in `*cursor`. Close it with `larch_cursor_close` (also after its
// transaction ended; until then its calls are `LARCH_EBADHANDLE`).
//
// # Safety
// `table` is null or a NUL-terminated string; `cursor` points to a place for the handle.
int larch_cursor_open(struct larch_txn *txn, const char *table, struct larch_cursor **cursor);

// Limits the cursor to keys from `start` (inclusive; null: no limit) to `end` (exclusive;
// null: no limit): `LARCH_FIRST`, `LARCH_LAST`, `LARCH_NEXT`, `LARCH_PREV` and the seeks stay
// within them. The cursor is no longer placed.
//
// # Safety
// `start` and `end` are null or point to `larch_val`s describing readable bytes.
int larch_cursor_bounds(struct larch_cursor *cursor,
                        const struct larch_val *start,
                        const struct larch_val *end);

// Moves the cursor as `op` says; on `LARCH_OK` stores the entry in `*key` and `*value` (each
// may be null). `LARCH_SET_KEY` and `LARCH_SET_RANGE` read the key to look for from `*key`.
// `LARCH_NOTFOUND` leaves the cursor on the entry it was on.
//
// # Safety
// `key` and `value` are null or point to `larch_val`s; for the seeks, `key` points to one
// describing readable bytes.
int larch_cursor_get(struct larch_cursor *cursor,
                     struct larch_val *key,
                     struct larch_val *value,
                     int op);

// Frees a cursor (also after its transaction ended).
int larch_cursor_close(struct larch_cursor *cursor);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* LARCH_H */
