/*
 * Thin C shim over Berkeley DB's method tables (DB_ENV, DB, DB_TXN, DBC are structs of
 * function pointers whose layout only the installed <db.h> knows). Why a shim: declaring those
 * structs by hand in Rust would silently break on any layout difference. The shim never links
 * against libdb: the only free functions it needs (db_env_create, db_create) are passed in as
 * pointers that the Rust side obtained with dlopen, so the larch-bench binary starts on a
 * machine without libdb and reports the engine as unavailable.
 */
#include <db.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LB_OK 0
#define LB_NOTFOUND 100001
#define LB_DEADLOCK 100002

typedef int (*lb_env_create_fn)(DB_ENV **, u_int32_t);
typedef int (*lb_db_create_fn)(DB **, DB_ENV *, u_int32_t);

typedef struct lb_bdb {
    DB_ENV *env;
    DB *db;
    int sync;
} lb_bdb;

typedef struct lb_bdb_sess {
    lb_bdb *h;
    DB_TXN *txn;
    DBC *cur;
    DBT kbuf;
    DBT vbuf;
} lb_bdb_sess;

static int map_rc(int rc) {
    if (rc == 0) return LB_OK;
    if (rc == DB_NOTFOUND || rc == DB_KEYEMPTY) return LB_NOTFOUND;
    if (rc == DB_LOCK_DEADLOCK || rc == DB_LOCK_NOTGRANTED) return LB_DEADLOCK;
    return rc;
}

const char *lb_bdb_version(void) { return DB_VERSION_STRING; }

int lb_bdb_open(void *env_create, void *db_create, const char *home, uint64_t cache_bytes,
                int sync, uint32_t page_bytes, lb_bdb **out) {
    lb_bdb *h = calloc(1, sizeof(*h));
    int rc;
    if (h == NULL) return ENOMEM;
    h->sync = sync;
    rc = ((lb_env_create_fn)env_create)(&h->env, 0);
    if (rc != 0) goto fail;
    rc = h->env->set_cachesize(h->env, (u_int32_t)(cache_bytes >> 30),
                               (u_int32_t)(cache_bytes & ((1u << 30) - 1)), 1);
    if (rc != 0) goto fail;
    /* Without --sync the log is written at commit but not flushed (Symas' db_bench_bdb). */
    if (!sync && (rc = h->env->set_flags(h->env, DB_TXN_WRITE_NOSYNC, 1)) != 0) goto fail;
    if ((rc = h->env->set_lk_detect(h->env, DB_LOCK_DEFAULT)) != 0) goto fail;
    if ((rc = h->env->set_lk_max_locks(h->env, 200000)) != 0) goto fail;
    if ((rc = h->env->set_lk_max_objects(h->env, 200000)) != 0) goto fail;
    if ((rc = h->env->set_lk_max_lockers(h->env, 10000)) != 0) goto fail;
    if ((rc = h->env->log_set_config(h->env, DB_LOG_AUTO_REMOVE, 1)) != 0) goto fail;
    rc = h->env->open(h->env, home,
                      DB_CREATE | DB_INIT_LOCK | DB_INIT_LOG | DB_INIT_MPOOL | DB_INIT_TXN |
                          DB_THREAD | DB_RECOVER,
                      0644);
    if (rc != 0) goto fail;
    rc = ((lb_db_create_fn)db_create)(&h->db, h->env, 0);
    if (rc != 0) goto fail;
    if (page_bytes != 0 && (rc = h->db->set_pagesize(h->db, page_bytes)) != 0) goto fail;
    rc = h->db->open(h->db, NULL, "data.bdb", NULL, DB_BTREE,
                     DB_CREATE | DB_THREAD | DB_AUTO_COMMIT, 0644);
    if (rc != 0) goto fail;
    *out = h;
    return LB_OK;
fail:
    if (h->db != NULL) h->db->close(h->db, 0);
    if (h->env != NULL) h->env->close(h->env, 0);
    free(h);
    return map_rc(rc);
}

void lb_bdb_close(lb_bdb *h) {
    if (h == NULL) return;
    h->db->close(h->db, 0);
    h->env->close(h->env, 0);
    free(h);
}

lb_bdb_sess *lb_bdb_session(lb_bdb *h) {
    lb_bdb_sess *s = calloc(1, sizeof(*s));
    if (s == NULL) return NULL;
    s->h = h;
    s->kbuf.flags = DB_DBT_REALLOC;
    s->vbuf.flags = DB_DBT_REALLOC;
    return s;
}

void lb_bdb_cursor_close(lb_bdb_sess *s) {
    if (s->cur != NULL) {
        s->cur->close(s->cur);
        s->cur = NULL;
    }
}

void lb_bdb_session_free(lb_bdb_sess *s) {
    if (s == NULL) return;
    lb_bdb_cursor_close(s);
    if (s->txn != NULL) s->txn->abort(s->txn);
    free(s->kbuf.data);
    free(s->vbuf.data);
    free(s);
}

/* Reads without a transaction (degree-2 page locks), retried on deadlock with a writer. */
int lb_bdb_get(lb_bdb_sess *s, const void *k, size_t kl, const void **v, size_t *vl) {
    DBT key;
    int rc, tries;
    memset(&key, 0, sizeof(key));
    key.data = (void *)k;
    key.size = (u_int32_t)kl;
    for (tries = 0; tries < 1000; tries++) {
        rc = s->h->db->get(s->h->db, NULL, &key, &s->vbuf, 0);
        if (rc != DB_LOCK_DEADLOCK) break;
    }
    if (rc == 0) {
        *v = s->vbuf.data;
        *vl = s->vbuf.size;
    }
    return map_rc(rc);
}

int lb_bdb_begin(lb_bdb_sess *s) {
    int rc = s->h->env->txn_begin(s->h->env, NULL, &s->txn, 0);
    if (rc != 0) s->txn = NULL;
    return map_rc(rc);
}

int lb_bdb_put(lb_bdb_sess *s, const void *k, size_t kl, const void *v, size_t vl) {
    DBT key, val;
    memset(&key, 0, sizeof(key));
    memset(&val, 0, sizeof(val));
    key.data = (void *)k;
    key.size = (u_int32_t)kl;
    val.data = (void *)v;
    val.size = (u_int32_t)vl;
    return map_rc(s->h->db->put(s->h->db, s->txn, &key, &val, 0));
}

int lb_bdb_del(lb_bdb_sess *s, const void *k, size_t kl) {
    DBT key;
    memset(&key, 0, sizeof(key));
    key.data = (void *)k;
    key.size = (u_int32_t)kl;
    return map_rc(s->h->db->del(s->h->db, s->txn, &key, 0));
}

int lb_bdb_commit(lb_bdb_sess *s, int sync) {
    int rc;
    if (s->txn == NULL) return EINVAL;
    rc = s->txn->commit(s->txn, sync ? DB_TXN_SYNC : 0);
    s->txn = NULL;
    return map_rc(rc);
}

void lb_bdb_abort(lb_bdb_sess *s) {
    if (s->txn != NULL) s->txn->abort(s->txn);
    s->txn = NULL;
}

/* op: 0 first, 1 next, 2 last, 3 prev, 4 set_range(k). */
int lb_bdb_cursor_step(lb_bdb_sess *s, int op, const void *k, size_t kl, const void **ko,
                       size_t *kol, const void **vo, size_t *vol) {
    u_int32_t flag;
    int rc;
    if (s->cur == NULL) {
        rc = s->h->db->cursor(s->h->db, NULL, &s->cur, 0);
        if (rc != 0) {
            s->cur = NULL;
            return map_rc(rc);
        }
    }
    switch (op) {
    case 0: flag = DB_FIRST; break;
    case 1: flag = DB_NEXT; break;
    case 2: flag = DB_LAST; break;
    case 3: flag = DB_PREV; break;
    case 4:
        flag = DB_SET_RANGE;
        if (s->kbuf.ulen < kl || s->kbuf.data == NULL) {
            void *p = realloc(s->kbuf.data, kl);
            if (p == NULL) return ENOMEM;
            s->kbuf.data = p;
            s->kbuf.ulen = (u_int32_t)kl;
        }
        memcpy(s->kbuf.data, k, kl);
        s->kbuf.size = (u_int32_t)kl;
        break;
    default: return EINVAL;
    }
    rc = s->cur->get(s->cur, &s->kbuf, &s->vbuf, flag);
    if (rc == 0) {
        /* DB_DBT_REALLOC may have grown the buffer; remember its capacity. */
        if (s->kbuf.ulen < s->kbuf.size) s->kbuf.ulen = s->kbuf.size;
        *ko = s->kbuf.data;
        *kol = s->kbuf.size;
        *vo = s->vbuf.data;
        *vol = s->vbuf.size;
    }
    return map_rc(rc);
}
