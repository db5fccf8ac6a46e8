//! Helpers shared by the integration tests (`mod common;` in each).

/// Every entry of a range, copied out, in its order; panics on a read error.
pub fn collect(it: larchdb::Range<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}
