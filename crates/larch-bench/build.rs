//! Compiles the Berkeley DB and WiredTiger shims (shim/*.c) when their headers are installed.
//!
//! Why: both libraries expose their API as structs of function pointers (and WiredTiger's
//! set_key is variadic), whose layout only the installed header knows. The shims never link the
//! libraries: the single free function each needs is passed in after a runtime dlopen, so the
//! binary still starts, and reports the engine unavailable, where the library is missing. Where
//! a header is missing, the shim is not built and `larch_shim_<name>` stays unset, so the
//! adapter reports "rebuild after installing <pkg>".

use std::path::Path;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(larch_shim_bdb)");
    println!("cargo:rustc-check-cfg=cfg(larch_shim_wt)");
    println!("cargo:rerun-if-changed=shim/bdb_shim.c");
    println!("cargo:rerun-if-changed=shim/wt_shim.c");
    let include = std::env::var("LARCH_BENCH_INCLUDE").unwrap_or_else(|_| "/usr/include".into());
    println!("cargo:rerun-if-env-changed=LARCH_BENCH_INCLUDE");
    for (header, shim, cfg) in [
        ("db.h", "shim/bdb_shim.c", "larch_shim_bdb"),
        ("wiredtiger.h", "shim/wt_shim.c", "larch_shim_wt"),
    ] {
        let path = Path::new(&include).join(header);
        println!("cargo:rerun-if-changed={}", path.display());
        if !path.exists() {
            println!(
                "cargo:warning=larch-bench: {} not found; adapter disabled",
                path.display()
            );
            continue;
        }
        // A header of an unexpected version must not break the build: warn, and the adapter
        // reports itself unavailable.
        match cc::Build::new()
            .file(shim)
            .include(&include)
            .warnings(true)
            .opt_level(2)
            .try_compile(cfg)
        {
            Ok(()) => println!("cargo:rustc-cfg={cfg}"),
            Err(e) => println!(
                "cargo:warning=larch-bench: {shim} did not compile ({e}); adapter disabled"
            ),
        }
    }
}
