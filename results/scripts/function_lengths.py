#!/usr/bin/env python3
"""Function lengths in src/ (lines from `fn` to its closing brace), outside `#[cfg(test)]`
modules: how many exceed 150, 120 and 100 lines, and the longest ones.

    python3 results/scripts/function_lengths.py [--top N] [ROOT]
"""
import os, re, sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")


def strip(line):
    """The line without string literals, char literals and // comments (enough for braces)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//", 1)[0]


def functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i, test_depth, depth = [], 0, None, 0
    while i < len(lines):
        code = strip(lines[i])
        if test_depth is None and re.match(r"\s*#\[cfg\(test\)\]", lines[i]):
            test_depth = depth  # the next item is test code
        m = FN.match(lines[i])
        if m and test_depth is None and "{" in "".join(strip(l) for l in lines[i:i + 12]):
            # Walk to the matching brace of the body.
            d, j, opened = 0, i, False
            while j < len(lines):
                c = strip(lines[j])
                if not opened and ";" in c and "{" not in c and d == 0:
                    break  # a declaration without a body
                d += c.count("{") - c.count("}")
                opened = opened or "{" in c
                if opened and d <= 0:
                    out.append((j - i + 1, m.group(6), path, i + 1))
                    break
                j += 1
        depth += code.count("{") - code.count("}")
        if test_depth is not None and depth <= test_depth and "}" in code:
            test_depth = None
        i += 1
    return out


def main():
    args = sys.argv[1:]
    top = 15
    if args[:1] == ["--top"]:
        top, args = int(args[1]), args[2:]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "..")
    found = []
    for d, _, files in os.walk(os.path.join(root, "src")):
        if "/helpers/" in d + "/" or "/target" in d:
            continue
        for f in files:
            if f.endswith(".rs") and not f.endswith("_tests.rs"):
                found += functions(os.path.join(d, f))
    found.sort(reverse=True)
    for n in (150, 120, 100):
        print(f"over {n} lines: {sum(1 for f in found if f[0] > n)}")
    print(f"functions: {len(found)}")
    for n, name, path, line in found[:top]:
        print(f"{n:5} {name}  {os.path.relpath(path, root)}:{line}")


main()
