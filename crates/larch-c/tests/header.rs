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

/// The doc comment the header gives the first line holding `decl`, joined into one line.
fn doc_of(header: &str, decl: &str) -> String {
    let lines: Vec<&str> = header.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(decl))
        .unwrap_or_else(|| panic!("{decl:?} is not in the header"));
    let mut doc = Vec::new();
    for l in lines[..at].iter().rev() {
        match l.trim().strip_prefix("//") {
            Some(text) => doc.push(text.trim()),
            None => break,
        }
    }
    doc.reverse();
    doc.join(" ")
}

fn header() -> String {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(crate_dir.join("include/larch.h")).unwrap()
}

/// The page sizes the header documents are the engine's, and the engine takes exactly them.
#[test]
fn the_headers_page_size_range_is_the_engines() {
    use larchdb::limits::{PAGE_BYTES_DEFAULT, PAGE_BYTES_MAX, PAGE_BYTES_MIN};
    let doc = doc_of(&header(), "uint32_t page_bytes;");
    let range = format!("a power of two from {PAGE_BYTES_MIN} to {PAGE_BYTES_MAX}");
    let default = format!("0 for the default ({PAGE_BYTES_DEFAULT})");
    assert!(doc.contains(&range), "{doc:?} does not say {range:?}");
    assert!(doc.contains(&default), "{doc:?} does not say {default:?}");

    let dir = tempfile::tempdir().unwrap();
    let open = |page_bytes: u32| {
        let path = std::ffi::CString::new(
            dir.path()
                .join(format!("db-{page_bytes}"))
                .to_str()
                .unwrap(),
        )
        .unwrap();
        let mut o = std::mem::MaybeUninit::<larch::larch_options>::uninit();
        let mut db = std::ptr::null_mut();
        // SAFETY: `o` is filled by larch_options_init before it is read; valid arguments.
        unsafe {
            larch::larch_options_init(o.as_mut_ptr());
            let mut o = o.assume_init();
            o.page_bytes = page_bytes;
            let rc = larch::larch_open(path.as_ptr(), &o, &mut db);
            if rc == larch::LARCH_OK {
                assert_eq!(larch::larch_close(db), larch::LARCH_OK);
            }
            rc
        }
    };
    assert_eq!(open(PAGE_BYTES_MIN / 2), larch::LARCH_EOPTIONS);
    assert_eq!(open(PAGE_BYTES_MIN), larch::LARCH_OK);
    assert_eq!(open(PAGE_BYTES_MAX), larch::LARCH_OK);
    assert_eq!(open(PAGE_BYTES_MAX * 2), larch::LARCH_EOPTIONS);
}

/// `larch_options_init` gives the engine's defaults (`Options::default()`), and the header
/// says which value of each switch is the default.
#[test]
fn the_options_defaults_are_the_engines() {
    let d = larchdb::Options::default();
    let mut o = std::mem::MaybeUninit::<larch::larch_options>::uninit();
    // SAFETY: larch_options_init fills every field.
    let o = unsafe {
        larch::larch_options_init(o.as_mut_ptr());
        o.assume_init()
    };
    assert_eq!(o.struct_bytes as usize, std::mem::size_of_val(&o));
    assert_eq!(o.page_bytes, 0, "0: the engine's default page size");
    assert_eq!(o.checkpoint_bytes, 0, "0: the engine's default");
    assert_eq!(o.memory_budget, d.memory_budget, "0: from the machine");
    assert_eq!(
        o.log_room_bytes, d.log_room_bytes,
        "0: the room checkpoints call for"
    );
    assert_eq!(o.frames_bytes, 0, "0: the engine's default");
    assert_eq!(d.frames_bytes, larchdb::FRAMES_AUTO);
    assert_eq!(o.reserved, [0; 5]);
    assert_eq!(d.durability, larchdb::Durability::Immediate);
    assert_eq!(o.durability, larch::LARCH_DURABILITY_IMMEDIATE);
    let header = header();
    for (field, c, rust) in [
        ("read_only", o.read_only, d.read_only),
        ("create", o.create, d.create),
        ("log", o.log, d.log),
        ("verify_checksums", o.verify_checksums, d.verify_checksums),
        ("compact_on_close", o.compact_on_close, d.compact_on_close),
    ] {
        assert_eq!(
            c != 0,
            rust,
            "larch_options_init's {field} is not the engine's"
        );
        let doc = doc_of(&header, &format!("int {field};"));
        let says = if rust {
            "Non-zero (the default)"
        } else {
            "Zero (the default)"
        };
        assert!(
            doc.starts_with(says) || doc.contains(&format!(". {says}")),
            "the header's {field}: {doc:?} does not say {says:?}"
        );
    }
}

/// The limits the header's error codes state are the engine's: the largest key (and that the
/// empty key is valid), the largest value, the longest table name.
#[test]
fn the_headers_error_codes_state_the_engines_limits() {
    use larchdb::limits::{
        key_bytes_max, PAGE_BYTES_DEFAULT, TABLE_NAME_BYTES_MAX, VALUE_BYTES_MAX,
    };
    let header = header();
    let key = doc_of(&header, "#define LARCH_EKEYTOOLARGE ");
    let key_max = key_bytes_max(PAGE_BYTES_DEFAULT);
    assert!(
        key.contains(&format!(
            "{key_max} bytes at {PAGE_BYTES_DEFAULT}-byte pages"
        )),
        "{key:?}"
    );
    assert!(key.contains("The empty key is valid"), "{key:?}");
    let value = doc_of(&header, "#define LARCH_EVALUETOOLARGE ");
    assert!(
        value.contains(&format!("({VALUE_BYTES_MAX} bytes")),
        "{value:?}"
    );
    let name = doc_of(&header, "#define LARCH_ETABLENAME ");
    assert_eq!(
        name,
        format!("The table name is empty or longer than {TABLE_NAME_BYTES_MAX} bytes.")
    );

    // And the engine behaves so through the C API.
    let dir = tempfile::tempdir().unwrap();
    let path = std::ffi::CString::new(dir.path().join("db").to_str().unwrap()).unwrap();
    let mut db = std::ptr::null_mut();
    let mut txn = std::ptr::null_mut();
    let val = |b: &[u8]| larch::larch_val {
        data: b.as_ptr(),
        len: b.len(),
    };
    let table = |len: usize| std::ffi::CString::new(vec![b't'; len]).unwrap();
    // SAFETY: valid arguments throughout.
    unsafe {
        assert_eq!(
            larch::larch_open(path.as_ptr(), std::ptr::null(), &mut db),
            larch::LARCH_OK
        );
        assert_eq!(larch::larch_begin(db, 0, &mut txn), larch::LARCH_OK);
        let put = |k: &[u8]| larch::larch_put(txn, std::ptr::null(), &val(k), &val(b"v"), 0);
        assert_eq!(put(b""), larch::LARCH_OK, "the empty key");
        assert_eq!(put(&vec![1; key_max]), larch::LARCH_OK);
        assert_eq!(put(&vec![1; key_max + 1]), larch::LARCH_EKEYTOOLARGE);
        let create = |len: usize| larch::larch_table_create(txn, table(len).as_ptr());
        assert_eq!(create(0), larch::LARCH_ETABLENAME);
        assert_eq!(create(1), larch::LARCH_OK);
        assert_eq!(create(TABLE_NAME_BYTES_MAX), larch::LARCH_OK);
        assert_eq!(create(TABLE_NAME_BYTES_MAX + 1), larch::LARCH_ETABLENAME);
        assert_eq!(larch::larch_abort(txn), larch::LARCH_OK);
        assert_eq!(larch::larch_close(db), larch::LARCH_OK);
    }
}
