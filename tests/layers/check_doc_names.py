#!/usr/bin/env python3
"""Checks that docs/ARCHITECTURE.md names only code that exists, so the map cannot drift from the
sources. Every backquoted name of code in the document is looked up in the module folders:

- `Class::member` (or `namespace::name`, with or without `()`; `A::b().c()` is checked as `A::b`):
  `A::b` appears in a source, or `b` is a member named inside the braces of `class A`/`struct A`,
  or `b` is named in a file that opens `namespace A` (also as the last part of `pgwarden::x::A`);
- `function()` and a camelCase name (`countDataRow`): declared, defined or called somewhere
  (`name(`), or, for a name that is not a function (`kStatsWaitMs`), named as a whole word;
- a name followed by its file, `` `name` (`folder/file.h` ...`` or `` `name()` (`folder/file.h` ...``
  (a `{h,cpp}` pair counts as either), is named in that file.

Names outside the project (`std::`, `prometheus::`) are not looked up; `protocol::parse*` stands
for any name with that beginning. Prints each missing name with its line and exits 1."""
import pathlib
import re
import sys

FOLDERS = ["common", "protocol", "analysis", "history", "metrics", "guards", "budgets", "screens",
           "net", "pool", "config", "session", "mcp", "daemon"]
FOREIGN = {"std", "prometheus", "uv", "lua", "nlohmann"}

QUALIFIED = re.compile(r"`([A-Za-z_]\w*(?:::[A-Za-z_~]\w*\*?)+)(?:\(\))?[^`]*`")
CALLED = re.compile(r"`([A-Za-z_]\w*)\(\)`")
CAMEL = re.compile(r"`([a-z][a-z0-9]*[A-Z]\w*)`")
WITH_FILE = re.compile(r"`([A-Za-z_]\w*)(?:\(\))?` \(`([a-z_]+/[\w./{},]+)`")


def sources(root: pathlib.Path) -> dict:
    found = {}
    for folder in FOLDERS:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix in (".h", ".cpp", ".cc"):
                found[path.relative_to(root).as_posix()] = path.read_text(errors="replace")
    return found


def class_bodies(text: str, name: str):
    """The text inside the braces of each `class name` or `struct name` definition."""
    for match in re.finditer(r"\b(?:class|struct)\s+" + re.escape(name) + r"\b[^;{]*\{", text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        yield text[match.end():i]


def word(name: str) -> re.Pattern:
    return re.compile(r"\b" + re.escape(name.rstrip("*")) + ("" if name.endswith("*") else r"\b"))


def qualified_exists(name: str, files: dict) -> bool:
    parts = name.split("::")
    owner, member = parts[-2], parts[-1]
    if re.search(re.escape(name.rstrip("*")) + ("" if name.endswith("*") else r"\b"),
                 "\n".join(files.values())):
        return True
    member_word = word(member)
    namespace = re.compile(r"\bnamespace\s+(?:\w+::)*" + re.escape(owner) + r"\b")
    for text in files.values():
        if any(member_word.search(body) for body in class_bodies(text, owner)):
            return True
        if namespace.search(text) and member_word.search(text):
            return True
    return False


def plain_exists(name: str, files: dict) -> bool:
    pattern = word(name)
    return any(pattern.search(text) for text in files.values())


def file_names(spec: str) -> list:
    """`session/x.{h,cpp}` -> both files; `session/x.h` -> itself."""
    brace = re.match(r"(.*)\{([^}]*)\}(.*)", spec)
    if not brace:
        return [spec]
    return [brace.group(1) + ext + brace.group(3) for ext in brace.group(2).split(",")]


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    doc = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else root / "docs" / "ARCHITECTURE.md"
    files = sources(root)
    problems = []
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        for name in QUALIFIED.findall(line):
            if name.split("::")[0] in FOREIGN:
                continue
            if not qualified_exists(name, files):
                problems.append(f"{doc.name}:{number}: `{name}` names nothing in the sources")
        for name in set(CALLED.findall(line)) | set(CAMEL.findall(line)):
            if not plain_exists(name, files):
                problems.append(f"{doc.name}:{number}: `{name}` names nothing in the sources")
        for name, spec in WITH_FILE.findall(line):
            paths = [p for p in file_names(spec) if p in files]
            if not paths:
                problems.append(f"{doc.name}:{number}: `{spec}` is no source file")
            elif not any(word(name).search(files[p]) for p in paths):
                problems.append(f"{doc.name}:{number}: `{name}` is not in `{spec}`")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
