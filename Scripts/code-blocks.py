#!/usr/bin/env python3
"""Turns every Swift code block of the README and of the DocC articles into a program of its
own, as a user who pastes the block into a new package's main.swift gets it: the block's text
unchanged, with only the imports the block shows, in a package that depends on this one by path.

    Scripts/code-blocks.py [--traits T1,T2] OUTPUT_DIR

writes OUTPUT_DIR/Package.swift (one executable target per block, depending on the products
its imports name) and OUTPUT_DIR/blocks.txt (one line per block: target name, then FILE:LINE).
The programs in Tests/TopLevelPrograms/ (top-level code that must behave as it would in an app's
main.swift) join them, one target each. A block that is a package manifest (`import
PackageDescription`) is not a program: the README's is the one whose dependency line the
generated package uses, as written there but for the path, so that a user who copies it (into a
package whose checkout of this one is in a folder of any name) builds what the blocks build.
Compiler errors point at the Markdown line (`#sourceLocation`).

With --traits, the dependency on this package enables those package traits, and one more target,
`trait_dependencies`, depends on the products this package's manifest takes only under them
(Hummingbird for ExampleServer): the test command builds the blocks into its own scratch path,
with its traits, so that they reuse the modules its build compiled, and SwiftPM resolves only the
packages a graph's targets use, removing the other checkouts of that scratch path; with them in
the graph, the test build finds its checkouts untouched and compiles nothing again.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Modules of this package a block may import, and the packages of the others it may import.
PRODUCTS = {"DataStoreAPI", "InMemoryStore", "SQLiteStore", "LMDBStore", "PostgresStore", "JSONLStore",
            "StoreMigration", "DataStoreConformance", "DataStoreModels"}
OTHER_PACKAGES = {"Logging": ("swift-log", "https://github.com/apple/swift-log", "1.16.2")}


def documented_files():
    return [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "Sources", "*", "*.docc", "*.md")))


def blocks(path):
    """(line of the block's first line, lines) for each ```swift block of the file."""
    found = []
    current = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f.read().split("\n"), start=1):
            if current is not None:
                if line.strip() == "```":
                    found.append(current)
                    current = None
                else:
                    current[1].append(line)
            elif line.strip() == "```swift":
                current = (number + 1, [])
    return found


def readme_dependency(traits):
    """The README manifest's `.package(...)` line for this package, with its path replaced by
    the repository's (and `traits`, when given); exits naming what is wrong when the README has
    no such line."""
    for _, body in blocks(os.path.join(ROOT, "README.md")):
        if not any("import PackageDescription" in text for text in body):
            continue
        for text in body:
            match = re.search(r'\.package\(name: "DataStore", path: "([^"]+)"\)', text)
            if match:
                line = match.group(0).replace(f'path: "{match.group(1)}"', f'path: "{ROOT}"')
                if traits:
                    line = line[:-1] + ", traits: [" + ", ".join(f'"{t}"' for t in traits) + "])"
                return line
    sys.exit("code-blocks: the README's Package.swift block has no .package(name: \"DataStore\", path: ...) line")


def trait_products(traits):
    """(package line, product dependency) for each product this package's manifest depends on only
    under one of `traits` (`condition: .when(traits: [...])`), sorted; exits naming what is
    missing when a product's package has no `.package(url:)` line."""
    with open(os.path.join(ROOT, "Package.swift"), encoding="utf-8") as f:
        manifest = f.read()
    packages = {re.sub(r"\.git$", "", url.rstrip("/").split("/")[-1]): line.strip().rstrip(",")
                for line, url in re.findall(r'^(\s*\.package\(url: "([^"]+)".*)$', manifest, re.M)}
    found = set()
    for name, package, condition in re.findall(
            r'\.product\(name: "(\w+)", package: "([\w.-]+)",\s*condition: \.when\(traits: \[([^\]]*)\]\)\)', manifest):
        if set(re.findall(r'"(\w+)"', condition)) & set(traits):
            if package not in packages:
                sys.exit(f"code-blocks: Package.swift names the package '{package}' but has no .package(url:) line for it")
            found.add((packages[package], f'.product(name: "{name}", package: "{package}")'))
    return sorted(found)


def imported_modules(lines):
    modules = []
    for line in lines:
        match = re.match(r"^\s*(?:@_spi\(\w+\)\s+)?(?:@preconcurrency\s+)?import\s+(\w+)", line)
        if match:
            modules.append(match.group(1))
    return modules


def main():
    arguments = sys.argv[1:]
    traits = []
    if len(arguments) == 3 and arguments[0] == "--traits":
        traits = sorted(t for t in arguments[1].split(",") if t)
        arguments = arguments[2:]
    if len(arguments) != 1:
        print("usage: code-blocks.py [--traits T1,T2] OUTPUT_DIR", file=sys.stderr)
        return 64
    output = os.path.abspath(arguments[0])
    targets = []
    for path in documented_files():
        relative = os.path.relpath(path, ROOT)
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        for line, body in blocks(path):
            if any("import PackageDescription" in text for text in body):
                continue
            name = f"block_{stem}_{line}"
            directory = os.path.join(output, "Sources", name)
            os.makedirs(directory, exist_ok=True)
            source = f'#sourceLocation(file: "{path}", line: {line})\n' + "\n".join(body) + "\n"
            with open(os.path.join(directory, "main.swift"), "w", encoding="utf-8") as f:
                f.write(source)
            targets.append((name, f"{relative}:{line}", imported_modules(body)))
    for path in sorted(glob.glob(os.path.join(ROOT, "Tests", "TopLevelPrograms", "*.swift"))):
        name = "program_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        with open(path, encoding="utf-8") as f:
            body = f.read().split("\n")
        directory = os.path.join(output, "Sources", name)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "main.swift"), "w", encoding="utf-8") as f:
            f.write(f'#sourceLocation(file: "{path}", line: 1)\n' + "\n".join(body))
        targets.append((name, os.path.relpath(path, ROOT), imported_modules(body)))
    packages = sorted({OTHER_PACKAGES[m] for _, _, modules in targets for m in modules if m in OTHER_PACKAGES})
    manifest = ["// swift-tools-version: 6.1", "// Generated by Scripts/code-blocks.py: one program per code block.",
                "import PackageDescription", "", "let package = Package(", '    name: "PastedBlocks",',
                "    platforms: [.macOS(.v15)],", "    dependencies: [",
                f'        {readme_dependency(traits)},']
    manifest += [f'        .package(url: "{url}", from: "{version}"),' for _, url, version in packages]
    kept = trait_products(traits)
    declared = {url for _, url, _ in packages}
    manifest += [f"        {line}," for line in sorted({line for line, _ in kept})
                 if re.search(r'url: "([^"]+)"', line).group(1) not in declared]
    manifest += ["    ],", "    targets: ["]
    for name, _, modules in targets:
        dependencies = [f'.product(name: "{m}", package: "DataStore")' for m in modules if m in PRODUCTS]
        dependencies += [f'.product(name: "{m}", package: "{OTHER_PACKAGES[m][0]}")'
                         for m in modules if m in OTHER_PACKAGES]
        manifest.append(f'        .executableTarget(name: "{name}", dependencies: [{", ".join(dependencies)}]),')
    if kept:
        directory = os.path.join(output, "Sources", "trait_dependencies")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "main.swift"), "w", encoding="utf-8") as f:
            f.write("// Keeps the packages the traits' products need in the graph (see Scripts/code-blocks.py).\n")
        manifest.append(f'        .executableTarget(name: "trait_dependencies", dependencies: [{", ".join(p for _, p in kept)}]),')
    manifest += ["    ]", ")", ""]
    with open(os.path.join(output, "Package.swift"), "w", encoding="utf-8") as f:
        f.write("\n".join(manifest))
    with open(os.path.join(output, "blocks.txt"), "w", encoding="utf-8") as f:
        f.write("".join(f"{name} {where}\n" for name, where, _ in targets))
    print(f"code-blocks: {len(targets)} blocks and programs, one program each, in {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
