#!/usr/bin/env python3
"""Checks what `cargo package` does not about the crates that are published (every workspace
member without `publish = false`), so that what crates.io and docs.rs show works:

- the licence text ships in the crate (a copy of the root LICENSE, identical to it: a symbolic
  link would not survive every checkout, and the crate cannot include a file above itself);
- the manifest names the repository, and every path dependency carries a version;
- the crate's README is inside the crate, and its links and images are absolute (crates.io
  shows the README away from the repository, where a relative link leads nowhere); so are the
  links of the crate root's `//!` docs (docs.rs);
- one minimum Rust version is stated everywhere: each crate's README says its manifest's
  `rust-version`, and the root README says the workspace's and names every crate that needs a
  later one.

Exits non-zero with one line per problem. Run by scripts/test.sh before `cargo package`.
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A Markdown link or image target, or an HTML src/href.
LINK = re.compile(r"\]\(([^)\s]+)[^)]*\)|(?:src|href)=\"([^\"]+)\"")


def relative_links(text):
    """The link targets in `text` that are neither absolute URLs nor anchors."""
    found = []
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        found.append(target)
    return found


def main():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--offline", "--format-version", "1"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    members = [p for p in meta["packages"] if p["id"] in meta["workspace_members"]]
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        workspace_msrv = re.search(r'^rust-version = "([^"]+)"', f.read(), re.M).group(1)
    with open(os.path.join(ROOT, "LICENSE"), "rb") as f:
        license_text = f.read()
    with open(os.path.join(ROOT, "README.md")) as f:
        # Words, not lines: a sentence may break anywhere.
        root_readme = " ".join(f.read().split())

    problems = []
    root_says = f"Rust {workspace_msrv} or later"
    if root_says not in root_readme:
        problems.append(f"README.md does not say {root_says!r} (the workspace's rust-version)")
    for p in members:
        name, msrv = p["name"], p.get("rust_version")
        if msrv and msrv != workspace_msrv:
            # "1.90 for larch-bench and larch-kv": the crate is named after its version.
            if not re.search(rf"{re.escape(msrv)} for [^.;)]*\b{re.escape(name)}\b", root_readme):
                problems.append(f"README.md does not say that {name} needs Rust {msrv}")

    published = [p for p in members if p.get("publish") is None]
    for p in published:
        name = p["name"]
        crate_dir = os.path.dirname(p["manifest_path"])
        where = os.path.relpath(crate_dir, ROOT)

        copy = os.path.join(crate_dir, "LICENSE")
        if os.path.islink(copy) or not os.path.isfile(copy):
            problems.append(f"{where}/LICENSE is missing or a link: copy the root LICENSE")
        else:
            with open(copy, "rb") as f:
                if f.read() != license_text:
                    problems.append(f"{where}/LICENSE differs from the root LICENSE")
        if not p.get("license"):
            problems.append(f"{where}/Cargo.toml has no license")
        if not p.get("repository"):
            problems.append(f"{where}/Cargo.toml has no repository")
        for d in p["dependencies"]:
            if d.get("path") and d["kind"] != "dev" and d["req"] == "*":
                problems.append(f"{where}/Cargo.toml: path dependency {d['name']} has no version")

        readme = p.get("readme")
        if not readme:
            problems.append(f"{where}/Cargo.toml names no readme")
        else:
            path = os.path.normpath(os.path.join(crate_dir, readme))
            if os.path.dirname(path) != crate_dir:
                problems.append(f"{where}: the readme {readme} is not the crate's own")
            with open(path) as f:
                text = f.read()
            for target in relative_links(text):
                problems.append(f"{where}/{readme}: relative link {target}")
            says = f"Rust {p.get('rust_version')} or later"
            if says not in " ".join(text.split()):
                problems.append(f"{where}/{readme} does not say {says!r}")

        for target in p["targets"]:
            if not {"lib", "bin"} & set(target["kind"]):
                continue
            with open(target["src_path"]) as f:
                docs = "\n".join(
                    line for line in f.read().splitlines() if line.lstrip().startswith("//!")
                )
            for link in relative_links(docs):
                problems.append(f"{os.path.relpath(target['src_path'], ROOT)}: relative link {link}")

    for line in problems:
        print(line)
    if problems:
        sys.exit(1)
    print(f"crates ok: {', '.join(p['name'] for p in published)}")


if __name__ == "__main__":
    main()
