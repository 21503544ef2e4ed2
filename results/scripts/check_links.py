#!/usr/bin/env python3
"""Check the relative links of every Markdown file in the repository.

For each `[text](target)` outside code, the target file or directory must exist and, for
`#anchor` links into a Markdown file (or the same file), a heading with that GitHub-style slug
must exist there. Prints each broken link and exits 1 if there is any, else 0.

Usage: python3 results/scripts/check_links.py [REPO_ROOT]   (default: two levels above this file)
"""

import re
import sys
import urllib.parse
from pathlib import Path

SKIP_DIRS = {"target", ".git", "node_modules"}
# Golden output of `pagebench report`: its charts/ links resolve inside a results directory.
SKIP_FILES = {"tests/fixtures/report/expected-report.md"}
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) or [text](target "title"); the text may hold one level of brackets
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def markdown_files(root):
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root)
        if relative.as_posix() in SKIP_FILES:
            continue
        if not any(part in SKIP_DIRS for part in relative.parts):
            yield path


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def github_slug(heading):
    """The anchor GitHub gives a heading: rendered text, lower case, punctuation dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w is Unicode-aware, as GitHub's is
    return text.replace(" ", "-")


def anchors_of(path, cache={}):
    if path not in cache:
        anchors, seen = set(), {}
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            anchors.update(HTML_ANCHOR.findall(line))
            match = HEADING.match(line)
            if not match:
                continue
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
        cache[path] = anchors
    return cache[path]


def link_targets(text):
    for number, line in prose_lines(text):
        line = CODE_SPAN.sub("", line)
        for match in INLINE_LINK.finditer(line):
            yield number, match.group(1)
        match = REFERENCE_DEF.match(line)
        if match:
            yield number, match.group(1)


def problem(root, source, target):
    """Why a link is broken, or None when it is fine (or not relative)."""
    if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
        return None  # empty, http:, https:, mailto: …: not ours to check
    file_part, _, anchor = target.partition("#")
    file_part = urllib.parse.unquote(file_part)
    if file_part.startswith("/"):
        resolved = root / file_part.lstrip("/")
    elif file_part:
        resolved = source.parent / file_part
    else:
        resolved = source
    if not resolved.exists():
        return f"no such file: {file_part}"
    if anchor and resolved.is_file() and resolved.suffix == ".md":
        if urllib.parse.unquote(anchor).lower() not in anchors_of(resolved.resolve()):
            return f"no heading with anchor #{anchor} in {resolved.relative_to(root)}"
    return None


def main():
    default_root = Path(__file__).resolve().parents[2]
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else default_root
    broken = checked = 0
    for source in markdown_files(root):
        for number, target in link_targets(source.read_text(encoding="utf-8")):
            checked += 1
            why = problem(root, source, target)
            if why:
                broken += 1
                print(f"{source.relative_to(root)}:{number}: ({target}) {why}")
    print(f"{checked} links checked, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
