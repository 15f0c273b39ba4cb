#!/usr/bin/env python3
"""Checks that namespaces follow folders: what a file in folder `x/` defines lives in
`pgwarden::x` (or a namespace inside it); `common/` may also use `pgwarden` itself. A block that
only forward-declares another folder's classes (`namespace pgwarden::y { class Z; }`) defines
nothing and is not counted. Folders still in another folder's namespace are listed in
EXCEPTIONS; an exception no longer in use is reported too, so the list only shrinks."""
import pathlib
import re
import sys

FOLDERS = ["common", "protocol", "analysis", "history", "metrics", "guards", "budgets", "screens",
           "net", "pool", "config", "studio", "session", "mcp", "daemon"]

# (folder, namespace): a folder's files still defining names in a namespace not their own.
EXCEPTIONS = {
    ("common", "pgwarden::config"): "the YAML readers every section's parser shares (config::getInt, "
                                    "config::fail), beside config/'s schema in the same namespace",
}

BLOCK = re.compile(r"^namespace (pgwarden(?:::[a-z_]+)*) \{\n(.*?)^\}  // namespace \1\s*$", re.M | re.S)
FORWARD = re.compile(r"^\s*((class|struct) [A-Za-z_][A-Za-z0-9_]*;|//.*)?\s*$")


def own(folder: str, namespace: str) -> bool:
    if folder == "common" and namespace == "pgwarden":
        return True
    return namespace == f"pgwarden::{folder}" or namespace.startswith(f"pgwarden::{folder}::")


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    used = set()
    for folder in FOLDERS:
        base = root / folder
        for path in sorted(base.rglob("*")) if base.is_dir() else []:
            if path.suffix not in (".h", ".cpp"):
                continue
            rel = path.relative_to(root).as_posix()
            for m in BLOCK.finditer(path.read_text(errors="replace")):
                namespace, body = m.group(1), m.group(2)
                if own(folder, namespace) or all(FORWARD.match(l) for l in body.splitlines()):
                    continue
                # A nested namespace of an excepted one counts as that one.
                key = next((k for k in EXCEPTIONS if k[0] == folder and
                            (namespace == k[1] or namespace.startswith(k[1] + "::"))), None)
                if key:
                    used.add(key)
                    continue
                problems.append(f"{rel}: defines names in {namespace}, not in pgwarden::{folder}")
    for stale in sorted(set(EXCEPTIONS) - used):
        problems.append(f"exception no longer needed, remove it: {stale}")
    for p in problems:
        print(p)
    print(f"namespaces: {len(problems)} problem(s), {len(used)} exception(s) still in use")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
