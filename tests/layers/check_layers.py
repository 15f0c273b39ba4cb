#!/usr/bin/env python3
"""Checks the direction of every project include: a folder may include only folders of its own layer
or below (docs/ARCHITECTURE.md, "Modules"). Exceptions still to be turned around are listed in
ALLOWED with the reason; an allowed include that no longer exists is reported too, so the list
only shrinks."""
import pathlib
import re
import sys

LAYERS = {
    "common": 1,
    "protocol": 2, "analysis": 2, "history": 2, "metrics": 2,
    "guards": 3, "budgets": 3, "screens": 3,
    "net": 4, "pool": 4,
    "config": 5, "studio": 5,
    "session": 6, "mcp": 6,
    "daemon": 7,
}
# Same-layer folders that must not include each other in this direction.
FORBIDDEN_SAME_LAYER = {("protocol", "analysis"), ("analysis", "protocol"), ("metrics", "history"),
                        ("history", "metrics"), ("net", "pool"),
                        ("guards", "budgets")}  # budgets sits above guards

# (file, included header): known upward includes, each to be removed by turning the dependency
# around. Empty: every include runs downward. Kept so that an exception, if one is ever needed,
# is named here with its reason and reported once it is no longer used.
ALLOWED: set = set()
# Folders whose every include of one upper header is tolerated, with the reason. Empty likewise.
ALLOWED_TARGETS: set = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    used = set()
    for folder, layer in LAYERS.items():
        for path in sorted((root / folder).rglob("*")) if (root / folder).is_dir() else []:
            if path.suffix not in (".h", ".cpp", ".cc"):
                continue
            rel = path.relative_to(root).as_posix()
            for m in INCLUDE.finditer(path.read_text(errors="replace")):
                target = m.group(1)
                header = m.group(0).split('"')[1]
                if target not in LAYERS or target == folder:
                    continue
                upward = LAYERS[target] > layer or (folder, target) in FORBIDDEN_SAME_LAYER
                if not upward:
                    continue
                if (rel, header) in ALLOWED:
                    used.add((rel, header))
                    continue
                if (folder, header) in ALLOWED_TARGETS:
                    used.add((folder, header))
                    continue
                problems.append(f"{rel}: includes {header} (layer {LAYERS[target]} above {folder}'s {layer})")
    stale = sorted((ALLOWED | ALLOWED_TARGETS) - used)
    for s in stale:
        problems.append(f"allow-list entry no longer needed, remove it: {s}")
    for p in problems:
        print(p)
    print(f"layers: {len(problems)} problem(s), {len(used)} allowed exception(s) still in use")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
