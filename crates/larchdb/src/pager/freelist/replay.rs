//! Loading a free set from its persisted chain: every entry replayed in order and checked.

use super::bitmap::Bitmap;
use super::{Extent, FreeSet, KIND_DURABLE, KIND_FREE, KIND_READERS, KIND_RELEASE, KIND_REMOVE};
use crate::error::{Error, Result};
use crate::layout::META_SLOTS;
use std::collections::BTreeMap;

/// Rebuilds a free set from a freelist chain's pages in the order they apply (the chain is
/// stored newest first, so this is the chain reversed), each with its entries in order.
/// Every entry is checked against `page_count` pages and commit `txn`, and against what the
/// entries before it left: adding space that is already free or pending, removing space that
/// is not free, or releasing what is not pending is `Corrupted`, naming the page that says so.
/// The result records changes from here on (`start_log`).
pub(crate) fn replay(pages: &[(u64, Vec<Extent>)], page_count: u64, txn: u64) -> Result<FreeSet> {
    let mut free = Bitmap::default();
    let mut pending = Bitmap::default();
    let mut by_kind: [BTreeMap<u64, Vec<(u64, u64)>>; 2] = [BTreeMap::new(), BTreeMap::new()];
    for (page, entries) in pages {
        let page = *page;
        let bad = |what: String| Error::corrupted(page, what);
        for &Extent {
            txn: etxn,
            start,
            pages: len,
            kind,
        } in entries
        {
            if kind == KIND_RELEASE {
                if start != 0 || !(len == KIND_READERS as u64 || len == KIND_DURABLE as u64) {
                    return Err(bad(format!("freelist release entry {start}+{len} invalid")));
                }
                let map = &mut by_kind[len as usize - 1];
                while let Some(entry) = map.first_entry() {
                    if *entry.key() > etxn {
                        break;
                    }
                    for (s, l) in entry.remove() {
                        pending.set(s, s + l, false);
                        if free.any(s, s + l) {
                            return Err(bad(format!("released extent {s}+{l} already free")));
                        }
                        free.set(s, s + l, true);
                    }
                }
                continue;
            }
            let end = start.checked_add(len);
            if start < META_SLOTS || len == 0 || end.is_none_or(|e| e > page_count) || etxn > txn {
                return Err(bad(format!("freelist extent {start}+{len} out of range")));
            }
            let end = start + len;
            match kind {
                KIND_FREE | KIND_READERS | KIND_DURABLE if (kind == KIND_FREE) == (etxn == 0) => {
                    if free.any(start, end) || pending.any(start, end) {
                        return Err(bad(format!("freelist extent {start}+{len} overlaps")));
                    }
                    if kind == KIND_FREE {
                        free.set(start, end, true);
                    } else {
                        pending.set(start, end, true);
                        by_kind[kind as usize - 1]
                            .entry(etxn)
                            .or_default()
                            .push((start, len));
                    }
                }
                KIND_REMOVE if etxn == 0 => {
                    if !free.all(start, end) {
                        return Err(bad(format!(
                            "freelist removes {start}+{len}, which is not free"
                        )));
                    }
                    free.set(start, end, false);
                }
                _ => {
                    return Err(bad(format!(
                        "freelist extent of unknown kind {kind} (txn {etxn})"
                    )))
                }
            }
        }
    }
    let mut set = FreeSet::default();
    for (start, len) in free.runs() {
        set.insert_unlogged(start, len);
    }
    for (i, map) in by_kind.into_iter().enumerate() {
        let kind = i as u32 + 1;
        for (etxn, extents) in map {
            set.add_pending(etxn, kind, &super::unborn(&extents));
        }
    }
    set.start_log();
    Ok(set)
}
