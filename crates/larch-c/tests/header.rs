//! The checked-in `include/larch.h` is what cbindgen generates from the source now: a change
//! to the API that was not carried to the header fails here. `LARCH_BLESS=1` rewrites it.

use std::path::Path;

#[test]
fn the_checked_in_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not read the crate")
        .write(&mut generated);
    let path = crate_dir.join("include/larch.h");
    if std::env::var_os("LARCH_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/larch.h is not what cbindgen generates from src/lib.rs now: run \
         `LARCH_BLESS=1 cargo test -p larch-c --test header` and commit the header"
    );
}
