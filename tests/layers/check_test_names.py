#!/usr/bin/env python3
"""Checks that the unit tests follow the code: every tests/unit/<folder>/<x>_test.cpp is the test
of <folder>/<x>.cpp or <folder>/<x>.h, so the test of a file is found by its name.

A test that is no unit test of one file lives in tests/suites/<folder>/<name>_test.cpp instead: a
suite that runs many sources together against something from outside them, such as the security
corpora through the whole guard chain, guards against a live PostgreSQL, the official JSON Schema
Test Suite, promtool and a real Prometheus on the exposition, the Grafana dashboard against a live
exposition, the config reference page against the loader, or random input to every decoder. Those
are built and labelled as the unit tests are; this check only asks that they are GoogleTest files
in a module's folder (tests/suites/<folder>/ where <folder> is a module), named *_test.cpp."""
import pathlib
import sys


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    unit = root / "tests" / "unit"
    suites = root / "tests" / "suites"
    problems = []
    named = 0
    for test in sorted(unit.glob("*/*_test.cpp")):
        rel = test.relative_to(unit).as_posix()
        folder = test.parent.name
        stem = test.name[: -len("_test.cpp")]
        if (root / folder / f"{stem}.cpp").exists() or (root / folder / f"{stem}.h").exists():
            named += 1
            continue
        problems.append(f"tests/unit/{rel}: no {folder}/{stem}.cpp or {folder}/{stem}.h; name the "
                        f"test after the file it tests (tests/unit/<folder>/<file>_test.cpp), or move "
                        f"a suite across many sources to tests/suites/{folder}/")
    for source in sorted(suites.glob("*/*.cpp")) if suites.is_dir() else []:
        rel = source.relative_to(suites).as_posix()
        if not (root / source.parent.name).is_dir():
            problems.append(f"tests/suites/{rel}: {source.parent.name}/ is no module folder")
        if not source.name.endswith("_test.cpp"):
            problems.append(f"tests/suites/{rel}: a suite's file is named <name>_test.cpp")
    for p in problems:
        print(p)
    print(f"test_names: {len(problems)} problem(s), {named} unit test file(s) named after their file")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
