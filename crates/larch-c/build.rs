//! Makes `liblarch.so` usable where the build leaves it, as the README's C example uses it:
//! - gives it a SONAME, `liblarch.so.<major>`, so that a program linked against it records
//!   that name (and the ABI it was built for), not the unversioned `liblarch.so`, and a
//!   symbolic link of that name beside it in the build's output directory;
//! - writes `larch.pc` there, a pkg-config file naming the header's directory and the
//!   library's (with an rpath to it, so that a program linked with it runs without
//!   `LD_LIBRARY_PATH`): `cc example.c $(pkg-config --cflags --libs target/release/larch.pc)`.
//!
//! The output directory (`target/<profile>/`, or `target/<triple>/<profile>/`) is where cargo
//! puts the libraries; a build script is told only its own `OUT_DIR`, three levels below it.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let family = env::var("CARGO_CFG_TARGET_FAMILY").unwrap_or_default();
    // ELF platforms take `-soname`; Apple's linker names a library with `-install_name`, and
    // Windows has neither.
    let elf = family.split(',').any(|f| f == "unix") && !matches!(os.as_str(), "macos" | "ios");
    if !elf {
        return;
    }
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
    let soname = format!("liblarch.so.{major}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let Some(lib_dir) = output_dir(&out_dir) else {
        println!(
            "cargo:warning=OUT_DIR {} is not under <output>/build/<package>/out: no larch.pc \
             or {soname} link was written",
            out_dir.display()
        );
        return;
    };
    let crate_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));

    // The link the loader looks for by the SONAME: dangling until the library is linked,
    // right after this script.
    let link = lib_dir.join(&soname);
    if fs::symlink_metadata(&link).is_ok() {
        fs::remove_file(&link).expect("remove the old SONAME link");
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink("liblarch.so", &link).expect("write the SONAME link");

    let pc = format!(
        "# pkg-config file of Larch's C API as built in this directory (written by\n\
         # crates/larch-c/build.rs): cc prog.c $(pkg-config --cflags --libs {pc_path})\n\
         libdir={lib}\n\
         includedir={include}\n\
         \n\
         Name: larch\n\
         Description: {description}\n\
         Version: {version}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -llarch\n\
         Libs.private: -lpthread -ldl -lm\n",
        pc_path = lib_dir.join("larch.pc").display(),
        lib = lib_dir.display(),
        include = crate_dir.join("include").display(),
        description = env::var("CARGO_PKG_DESCRIPTION").unwrap_or_default(),
        version = env::var("CARGO_PKG_VERSION").unwrap_or_default(),
    );
    let pc_path = lib_dir.join("larch.pc");
    if fs::read_to_string(&pc_path).ok().as_deref() != Some(pc.as_str()) {
        fs::write(&pc_path, pc).expect("write larch.pc");
    }
}

/// The directory cargo puts the libraries in, from the build script's `OUT_DIR`
/// (`<output>/build/larch-c-<hash>/out`).
fn output_dir(out_dir: &Path) -> Option<PathBuf> {
    let package = out_dir.parent()?;
    let build = package.parent()?;
    if out_dir.file_name()? != "out" || build.file_name()? != "build" {
        return None;
    }
    Some(build.parent()?.to_path_buf())
}
