#!/usr/bin/env python3
"""Checks the size rules of docs/ARCHITECTURE.md: no source file of more than 800 lines and no
function of more than 120, in the module folders (the tests and benchmarks are not held to it).

Functions are found by their braces: a block opened outside every function, that is not a
namespace, class, struct, union, enum or extern block, is a function body (or a lambda or an
initializer at namespace scope, which count the same). Comments, strings and character literals
are blanked first, so a brace inside one is not counted; raw strings spanning lines are rare
enough in this code base that a stray brace in one shows up as a problem to look at, not a pass."""
import pathlib
import re
import sys

FOLDERS = ["common", "protocol", "analysis", "history", "metrics", "guards", "budgets", "screens",
           "net", "pool", "config", "session", "mcp", "daemon"]
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120

CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$|\bextern\s+\"C\"")


def blank(line: str) -> str:
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return re.sub(r"//.*", "", line)


def functions(lines):
    """(first line, line count, header) of every function body."""
    stack = []  # "container", "function" or "block", with the line a function starts at
    in_comment = False
    found = []
    since = ""  # the text since the last ';', '{' or '}': a head may span lines (base classes)
    for number, raw in enumerate(lines, 1):
        line = raw
        if in_comment:
            end = line.find("*/")
            if end < 0:
                continue
            line = line[end + 2:]
            in_comment = False
        line = re.sub(r"/\*.*?\*/", " ", blank(line))
        start = line.find("/*")
        if start >= 0:
            line = line[:start]
            in_comment = True
        if line.lstrip().startswith("#"):
            continue  # a preprocessor line is no part of a declaration's head
        for ch in line + "\n":
            if ch not in "{};":
                since += ch
                continue
            head, since = since, ""
            if ch == "{":
                if not any(kind != "container" for kind, _ in stack):
                    stack.append(("container" if CONTAINER.search(head) else "function", number))
                else:
                    stack.append(("block", number))
            elif ch == "}" and stack:
                kind, first = stack.pop()
                if kind == "function":
                    found.append((first, number - first + 1, lines[first - 1].strip()))
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    files = 0
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".h", ".cpp", ".cc"):
                continue
            files += 1
            rel = path.relative_to(root).as_posix()
            lines = path.read_text(errors="replace").split("\n")
            if len(lines) > MAX_FILE_LINES:
                problems.append(f"{rel}: {len(lines)} lines (at most {MAX_FILE_LINES})")
            for first, count, header in functions(lines):
                if count > MAX_FUNCTION_LINES:
                    problems.append(f"{rel}:{first}: a function of {count} lines (at most "
                                    f"{MAX_FUNCTION_LINES}): {header[:80]}")
    for p in problems:
        print(p)
    print(f"sizes: {files} files read, {len(problems)} problem(s)")
    if files == 0:
        print("sizes: no source file found under", root)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
