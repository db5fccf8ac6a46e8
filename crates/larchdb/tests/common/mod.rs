//! Helpers shared by the integration tests (`mod common;` in each).

/// Every entry of a range, copied out, in its order; panics on a read error.
#[allow(dead_code)] // Not every test that has `mod common;` scans.
pub fn collect(it: larchdb::Range<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Opens a database whose data file is `data` and whose log is `log` (fault storages: the
/// test keeps its own handles on them to crash, fail or copy them).
#[allow(dead_code)] // Not every test that has `mod common;` opens a logged database.
pub fn open_with_log(
    data: &larchdb::storage::FaultStorage,
    log: &larchdb::storage::FaultStorage,
    options: larchdb::Options,
) -> larchdb::Result<larchdb::Database> {
    larchdb::Database::open_storage_with_log(
        std::sync::Arc::new(data.clone()),
        std::sync::Arc::new(log.clone()),
        options,
    )
}
