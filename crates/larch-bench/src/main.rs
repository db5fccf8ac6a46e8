//! The `larch-bench` binary; see the library crate for the design.

fn main() {
    let code = larch_bench::main_with_args(std::env::args().collect());
    std::process::exit(code);
}
