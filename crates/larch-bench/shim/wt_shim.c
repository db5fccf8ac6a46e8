/*
 * Thin C shim over WiredTiger's method tables (WT_CONNECTION, WT_SESSION, WT_CURSOR are structs
 * of function pointers, and set_key/set_value are variadic). Why a shim: see bdb_shim.c. The
 * only free function, wiredtiger_open, is passed in as a pointer obtained with dlopen, so the
 * binary never links libwiredtiger.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wiredtiger.h>

#define LB_OK 0
#define LB_NOTFOUND 100001
#define LB_DEADLOCK 100002

typedef int (*lb_wt_open_fn)(const char *, WT_EVENT_HANDLER *, const char *, WT_CONNECTION **);

typedef struct lb_wt_sess {
    WT_SESSION *s;
    WT_CURSOR *c;    /* point operations */
    WT_CURSOR *scan; /* iteration */
    void *buf;
    size_t cap;
    int in_txn;
} lb_wt_sess;

static int map_rc(int rc) {
    if (rc == 0) return LB_OK;
    if (rc == WT_NOTFOUND) return LB_NOTFOUND;
    if (rc == WT_ROLLBACK) return LB_DEADLOCK;
    return rc;
}

const char *lb_wt_version(void) { return WIREDTIGER_VERSION_STRING; }

int lb_wt_open(void *open_fn, const char *home, const char *conn_config, const char *table_config,
               WT_CONNECTION **out) {
    WT_CONNECTION *conn = NULL;
    WT_SESSION *s = NULL;
    int rc = ((lb_wt_open_fn)open_fn)(home, NULL, conn_config, &conn);
    if (rc != 0) return map_rc(rc);
    rc = conn->open_session(conn, NULL, NULL, &s);
    if (rc == 0) rc = s->create(s, "table:bench", table_config);
    if (s != NULL) s->close(s, NULL);
    if (rc != 0) {
        conn->close(conn, NULL);
        return map_rc(rc);
    }
    *out = conn;
    return LB_OK;
}

void lb_wt_close(WT_CONNECTION *conn) {
    if (conn != NULL) conn->close(conn, NULL);
}

int lb_wt_session(WT_CONNECTION *conn, lb_wt_sess **out) {
    lb_wt_sess *ss = calloc(1, sizeof(*ss));
    int rc;
    if (ss == NULL) return ENOMEM;
    rc = conn->open_session(conn, NULL, NULL, &ss->s);
    if (rc == 0) rc = ss->s->open_cursor(ss->s, "table:bench", NULL, NULL, &ss->c);
    if (rc != 0) {
        if (ss->s != NULL) ss->s->close(ss->s, NULL);
        free(ss);
        return map_rc(rc);
    }
    *out = ss;
    return LB_OK;
}

void lb_wt_session_free(lb_wt_sess *ss) {
    if (ss == NULL) return;
    if (ss->in_txn) ss->s->rollback_transaction(ss->s, NULL);
    ss->s->close(ss->s, NULL); /* closes the cursors too */
    free(ss->buf);
    free(ss);
}

/* Copies the value into a session buffer and resets the cursor so that no page stays pinned. */
int lb_wt_get(lb_wt_sess *ss, const void *k, size_t kl, const void **v, size_t *vl) {
    WT_ITEM key, val;
    int rc;
    memset(&key, 0, sizeof(key));
    memset(&val, 0, sizeof(val));
    key.data = k;
    key.size = kl;
    ss->c->set_key(ss->c, &key);
    rc = ss->c->search(ss->c);
    if (rc == 0) rc = ss->c->get_value(ss->c, &val);
    if (rc == 0) {
        if (ss->cap < val.size) {
            void *p = realloc(ss->buf, val.size);
            if (p == NULL) {
                ss->c->reset(ss->c);
                return ENOMEM;
            }
            ss->buf = p;
            ss->cap = val.size;
        }
        memcpy(ss->buf, val.data, val.size);
        *v = ss->buf;
        *vl = val.size;
    }
    ss->c->reset(ss->c);
    return map_rc(rc);
}

int lb_wt_begin(lb_wt_sess *ss) {
    int rc = ss->s->begin_transaction(ss->s, NULL);
    if (rc == 0) ss->in_txn = 1;
    return map_rc(rc);
}

int lb_wt_put(lb_wt_sess *ss, const void *k, size_t kl, const void *v, size_t vl) {
    WT_ITEM key, val;
    memset(&key, 0, sizeof(key));
    memset(&val, 0, sizeof(val));
    key.data = k;
    key.size = kl;
    val.data = v;
    val.size = vl;
    ss->c->set_key(ss->c, &key);
    ss->c->set_value(ss->c, &val);
    return map_rc(ss->c->insert(ss->c));
}

int lb_wt_del(lb_wt_sess *ss, const void *k, size_t kl) {
    WT_ITEM key;
    memset(&key, 0, sizeof(key));
    key.data = k;
    key.size = kl;
    ss->c->set_key(ss->c, &key);
    return map_rc(ss->c->remove(ss->c));
}

int lb_wt_commit(lb_wt_sess *ss, int sync) {
    int rc = ss->s->commit_transaction(ss->s, sync ? "sync=on" : NULL);
    ss->in_txn = 0;
    ss->c->reset(ss->c);
    return map_rc(rc);
}

void lb_wt_rollback(lb_wt_sess *ss) {
    if (ss->in_txn) ss->s->rollback_transaction(ss->s, NULL);
    ss->in_txn = 0;
}

/* op: 0 first, 1 next, 2 last, 3 prev, 4 seek to the first key >= k. */
int lb_wt_cursor_step(lb_wt_sess *ss, int op, const void *k, size_t kl, const void **ko,
                      size_t *kol, const void **vo, size_t *vol) {
    WT_ITEM key, val;
    int rc, exact = 0;
    if (ss->scan == NULL) {
        rc = ss->s->open_cursor(ss->s, "table:bench", NULL, NULL, &ss->scan);
        if (rc != 0) {
            ss->scan = NULL;
            return map_rc(rc);
        }
    }
    switch (op) {
    case 0:
        ss->scan->reset(ss->scan);
        rc = ss->scan->next(ss->scan);
        break;
    case 1: rc = ss->scan->next(ss->scan); break;
    case 2:
        ss->scan->reset(ss->scan);
        rc = ss->scan->prev(ss->scan);
        break;
    case 3: rc = ss->scan->prev(ss->scan); break;
    case 4:
        memset(&key, 0, sizeof(key));
        key.data = k;
        key.size = kl;
        ss->scan->set_key(ss->scan, &key);
        rc = ss->scan->search_near(ss->scan, &exact);
        if (rc == 0 && exact < 0) rc = ss->scan->next(ss->scan);
        break;
    default: return EINVAL;
    }
    if (rc == 0) rc = ss->scan->get_key(ss->scan, &key);
    if (rc == 0) rc = ss->scan->get_value(ss->scan, &val);
    if (rc == 0) {
        *ko = key.data;
        *kol = key.size;
        *vo = val.data;
        *vol = val.size;
    }
    return map_rc(rc);
}

void lb_wt_cursor_close(lb_wt_sess *ss) {
    if (ss->scan != NULL) ss->scan->reset(ss->scan);
}
