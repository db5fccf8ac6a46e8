//! Keys that cut a tree into parts of about equal numbers of leaves: the slices of a
//! checkpoint by slices (`engine::checkpoint`).

use super::node_at;
use crate::error::Result;
use crate::pager::{PageSource, TableHeader};

/// Branches read at most to find the cuts: the levels below the root are read only while
/// they hold fewer than this many nodes.
const CUT_BRANCHES_MAX: usize = 4096;

/// Up to `parts - 1` keys, ascending, that cut the tree `hdr` into about `parts` key ranges of
/// about equal numbers of leaves: separators of the highest level of branches that has
/// `parts` times as many, taken at even steps. Reads the root, and the levels below it only
/// while the level above gave too few keys (at most `CUT_BRANCHES_MAX` branches). Empty for a
/// tree of one leaf, or `parts < 2`.
pub(crate) fn cuts<S: PageSource + ?Sized>(
    src: &S,
    hdr: &TableHeader,
    parts: usize,
) -> Result<Vec<Vec<u8>>> {
    if hdr.depth < 2 || parts < 2 {
        return Ok(Vec::new());
    }
    // Every separator of the levels read so far, ascending: together they bound the subtrees
    // of the next level down, each about the same number of leaves.
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut level = vec![hdr.root];
    for depth in 1..hdr.depth {
        let mut below = Vec::new();
        let mut found = Vec::new();
        for &r in &level {
            let n = node_at(src, r, false)?;
            for i in 0..n.n {
                found.push(n.key(i)?.to_vec());
            }
            if depth + 1 < hdr.depth {
                for i in 0..=n.n {
                    below.push(n.child(i)?);
                }
            }
        }
        keys.extend(found);
        if keys.len() + 1 >= parts * 4 || below.is_empty() || below.len() > CUT_BRANCHES_MAX {
            break;
        }
        level = below;
    }
    keys.sort_unstable();
    keys.dedup();
    let subtrees = keys.len() + 1;
    if subtrees < parts {
        return Ok(keys);
    }
    // Subtree boundaries at even steps: cut `j` before subtree `j * subtrees / parts`.
    Ok((1..parts)
        .map(|j| keys[j * subtrees / parts - 1].clone())
        .collect())
}
