#!/usr/bin/env bash
# The C API's tests in C (part of the test command, scripts/test.sh): builds liblarch, then
# compiles tests/c/test_larch.c and the README's C example
#   1. against the static library with AddressSanitizer and UndefinedBehaviorSanitizer, and
#   2. against the shared library, run under valgrind (memcheck; any error fails);
# then builds and runs the README's C example with the README's own commands, as written
# (`cargo build --release -p larch-c`, `cc` with target/release/larch.pc).
# Usage: crates/larch-c/tests/c/run.sh [--no-valgrind]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
crate="$(cd "$here/../.." && pwd)"
root="$(cd "$crate/../.." && pwd)"
cd "$root"

cargo build -q -p larch-c
lib="$root/target/debug"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The README's example, as a user would copy it: the first ```c block after "## From C".
awk '/^## From C/{s=1} s&&/^```c$/{p=1;next} p&&/^```$/{exit} p' "$root/README.md" > "$work/example.c"
test -s "$work/example.c" || { echo "no C example found in README.md"; exit 1; }

cflags=(-std=c11 -Wall -Wextra -Werror -g -I "$crate/include")

echo "== C tests, AddressSanitizer + UBSan, static library"
for prog in test_larch example; do
  src="$here/$prog.c"
  [ "$prog" = example ] && src="$work/example.c"
  gcc "${cflags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
    "$src" "$lib/liblarch.a" -lpthread -ldl -lm -o "$work/$prog-asan"
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 "./$prog-asan")
done

if [ "${1:-}" != "--no-valgrind" ]; then
  echo "== C tests, valgrind, shared library"
  for prog in test_larch example; do
    src="$here/$prog.c"
    [ "$prog" = example ] && src="$work/example.c"
    gcc "${cflags[@]}" "$src" -L "$lib" -llarch -Wl,-rpath,"$lib" -lpthread -o "$work/$prog"
    (cd "$work" && valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
      "./$prog")
  done
fi
echo "== the README's C example, built and run by the README's commands, as written"
# The commands are the first ```sh block after the example; they run at the repository's root,
# where the README says to save example.c. The files they make there (example.c, the program,
# its database) are removed afterwards, and .gitignore names them.
awk '/^## From C/{s=1} s&&/^```c$/{c=1} c&&/^```sh$/{p=1;next} p&&/^```$/{exit} p' \
  "$root/README.md" > "$work/readme-commands.sh"
test -s "$work/readme-commands.sh" || { echo "no build commands found in README.md"; exit 1; }
for f in example.c example example.larch example.larch-log example.larch-lock; do
  if [ -e "$root/$f" ]; then
    echo "$root/$f exists: the README's commands would overwrite it; move it away"
    exit 1
  fi
done
cleanup_readme() {
  rm -f "$root/example.c" "$root/example" "$root"/example.larch "$root"/example.larch-*
}
trap 'cleanup_readme; rm -rf "$work"' EXIT
cp "$work/example.c" "$root/example.c"
(cd "$root" && bash -euo pipefail "$work/readme-commands.sh") > "$work/readme-out.txt"
cat "$work/readme-out.txt"
# What the example prints: its three keys, in order.
printf 'apple = ripe\nbanana = ripe\ncherry = ripe\n' | cmp - "$work/readme-out.txt"
cleanup_readme

echo "C API tests passed"
