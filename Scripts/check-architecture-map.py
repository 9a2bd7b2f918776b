#!/usr/bin/env python3
"""Checks that every file and folder docs/architecture.md names exists in the tree, and every
test file and type it names: the maintainer's map must not point at what is gone.

    Scripts/check-architecture-map.py

A name in backticks that ends in a file extension (`Store.swift`, `test.sh`) or a slash
(`Transfer/`) must be the end of a tracked file's or folder's path; `…Tests` must be a test file;
a capitalised name followed by `.`, `(` or a backtick must be declared somewhere in Sources,
Tests or Benchmarks (a type), or be a target, an SPI or a package trait. Exits 1 naming each one that is missing."""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
text = (root / "docs/architecture.md").read_text()
files = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True,
                       check=True).stdout.split("\n")
folders = {"/".join(f.split("/")[:i]) + "/" for f in files for i in range(1, f.count("/") + 1)}
problems = []
for name in sorted(set(re.findall(r"`([A-Za-z0-9_./+-]+(?:\.swift|\.sh|\.py|\.txt|\.md|/))`", text))):
    known = folders if name.endswith("/") else files
    if not any(path == name or path.endswith("/" + name) for path in known):
        problems.append(f"the path '{name}'")
sources = "\n".join((root / f).read_text(errors="replace") for f in files
                    if f.endswith(".swift") and f.split("/")[0] in ("Sources", "Tests", "Benchmarks"))
package = (root / "Package.swift").read_text()
targets = {f.split("/")[1] for f in files if f.startswith(("Sources/", "Tests/")) and f.count("/") >= 2}
for name in sorted(set(re.findall(r"`([A-Z][A-Za-z0-9]+)(?=[.(`])", text))):
    if name.endswith("Tests") and not name.endswith("PackageTests"):
        if not any(f.endswith("/" + name + ".swift") for f in files) and name not in targets:
            problems.append(f"the test file '{name}'")
        continue
    if name in targets or name.isupper():
        continue
    # An SPI's name (`@_spi(Backend)`) or a package trait's (`Postgres`).
    if re.search(r"_spi\(" + name + r"\)", sources) or re.search(r'\.trait\(name: "' + name + '"', package):
        continue
    if not re.search(r"\b(class|struct|enum|protocol|typealias|actor|extension|case)\s+" + name + r"\b", sources):
        problems.append(f"the type '{name}'")
if problems:
    sys.exit("check-architecture-map: docs/architecture.md names what the tree does not hold: "
             + "; ".join(problems))
print("check-architecture-map: every path, test file and type the map names exists")
