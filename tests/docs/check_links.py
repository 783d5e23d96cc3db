#!/usr/bin/env python3
"""Fails if a relative link of the repository's Markdown files points nowhere.

  tests/docs/check_links.py [REPO_ROOT]

Reads README.md, docs/**/*.md, perf/README.md and every other *.md of the repository (not under
build*/ at the top, .git, .cache, .device or third-party folders). For each Markdown link
[text](target), image ![alt](target) and reference definition [ref]: target outside code blocks
and code spans:
  - http(s):, mailto: and other URLs with a scheme are skipped;
  - the path (relative to the file; a leading / means the repository's root) must exist, as a
    file or a folder;
  - an anchor (#part) into a .md file (the file itself when the target is only #part) must be the
    GitHub slug of one of its headings (lowercase, punctuation other than - and _ removed, spaces
    to -, repeated slugs suffixed -1, -2, ...) or an explicit <a name/id="..."> of the file.
Prints every broken link as file:line: target (why), and exits 1 if there is any. Standard library
only.
"""

import os
import re
import sys
import urllib.parse

SKIP_DIRS = {".git", ".cache", ".device", "node_modules", "third_party", "third-party",
             "thirdparty", "external", "vendor", "__pycache__"}

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
CODE_SPAN_WRAPPED = re.compile(r"(`+)(.+?)\1", re.DOTALL)  # a code span may wrap in a paragraph
# [text](target) or ![alt](target); the text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)"
                         r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        keep = []
        for d in sorted(dirnames):
            if d in SKIP_DIRS:
                continue
            if rel == "." and d.startswith("build"):
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            if name.endswith(".md"):
                yield os.path.join(dirpath, name)


def text_lines(path):
    """(line number, text) of the lines outside fenced code blocks, code spans blanked."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fence = None
    out = []
    for number, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                continue
        else:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and \
                    line.strip() == m.group(1):
                fence = None
            continue
        out.append((number, line))
    return out


def plain_heading_text(text):
    """The text GitHub renders for a heading's source: links to their text, no code marks."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", text)
    text = CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("*", "")
    return text


def slug(text):
    """GitHub's heading anchor: lowercase, punctuation but - and _ dropped, spaces to -."""
    text = plain_heading_text(text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


_anchor_cache = {}


def anchors_of(path):
    if path in _anchor_cache:
        return _anchor_cache[path]
    anchors = set()
    counts = {}
    previous = ""
    for _, line in text_lines(path):
        heading = None
        m = ATX.match(line)
        if m:
            heading = re.sub(r"[ \t]+#+$", "", m.group(2) or "")
            if heading.strip("#") == "":
                heading = heading.strip("#")
        elif SETEXT.match(line) and previous.strip() and not previous.lstrip().startswith(
                ("|", "-", "*", "+", ">")) and not ATX.match(previous):
            heading = previous.strip()
        if heading is not None:
            base = slug(heading)
            n = counts.get(base, 0)
            anchors.add(base if n == 0 else f"{base}-{n}")
            counts[base] = n + 1
        for a in HTML_ANCHOR.findall(line):
            anchors.add(a)
        previous = line
    _anchor_cache[path] = anchors
    return anchors


def paragraphs(lines):
    """Runs of consecutive non-blank lines, so that a link whose text wraps is seen whole."""
    block = []
    for number, line in lines:
        if line.strip() and block and block[-1][0] == number - 1:
            block.append((number, line))
            continue
        if block:
            yield block
        block = [(number, line)] if line.strip() else []
    if block:
        yield block


def link_targets(block):
    """(line number, target) of every link of a paragraph (code spans left out)."""
    text = "\n".join(line for _, line in block)
    starts = []
    offset = 0
    for number, line in block:
        starts.append((offset, number))
        offset += len(line) + 1
    stripped = CODE_SPAN_WRAPPED.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)

    def line_at(pos):
        found = block[0][0]
        for start, number in starts:
            if start <= pos:
                found = number
        return found

    for m in INLINE_LINK.finditer(stripped):
        yield line_at(m.start(2)), m.group(2)
    for number, line in block:
        m = REF_DEF.match(CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line))
        if m:
            yield number, m.group(2)


def check_target(root, source, target):
    """None if the link resolves, else why not."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or SCHEME.match(target) or target.startswith("//"):
        return None
    path_part, _, anchor = target.partition("#")
    path_part = urllib.parse.unquote(path_part)
    if path_part == "":
        resolved = source
    elif path_part.startswith("/"):
        resolved = os.path.join(root, path_part.lstrip("/"))
    else:
        resolved = os.path.join(os.path.dirname(source), path_part)
    resolved = os.path.normpath(resolved)
    if not os.path.exists(resolved):
        return "no such file or folder"
    if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
        anchor = urllib.parse.unquote(anchor)
        if anchor not in anchors_of(resolved):
            return f"no heading '#{anchor}' in {os.path.relpath(resolved, root)}"
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    broken = 0
    files = 0
    links = 0
    for path in markdown_files(root):
        files += 1
        rel = os.path.relpath(path, root)
        for block in paragraphs(text_lines(path)):
            for number, target in link_targets(block):
                links += 1
                why = check_target(root, path, target)
                if why:
                    broken += 1
                    print(f"{rel}:{number}: {target} ({why})")
    if broken:
        print(f"{broken} broken link(s) of {links} in {files} Markdown file(s)")
        return 1
    print(f"{links} link(s) in {files} Markdown file(s): all resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
