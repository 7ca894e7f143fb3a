#!/usr/bin/env bash
# README.md and docs/*.md as pages: README at most 15,360 bytes, no figures or wording tied to one machine or
# workplace (those belong in bench/), and every relative link naming a file that exists and, with #anchor, a
# heading of that page.
# Usage: tests/scripts/docs_test.sh SOURCE_DIR
set -euo pipefail
src=$(realpath "$1")
cd "$src"
fail=0

size=$(wc -c <README.md)
if [ "$size" -gt 15360 ]; then
  echo "FAILED: README.md is $size bytes, more than 15360: move reference text to a page under docs/" >&2
  fail=1
fi

# Text a page of the product must not hold: paths outside the repository, the machine a figure was measured on,
# test counts that change with every test added.
if grep -n -E -e '\.\./shared' -e '2-core' -e 'this machine' -e '2 cores here' -e '[0-9][0-9][0-9] tests' \
     README.md docs/*.md >&2; then
  echo "FAILED: the lines above name a machine, a path outside the repository or a test count" >&2
  fail=1
fi

python3 - README.md docs/*.md <<'PY' || fail=1
import os, re, sys

def slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")

def prose(path):
    """The page's lines outside fenced code blocks, with inline code blanked out."""
    lines, fence = [], False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            lines.append(re.sub(r"`[^`]*`", "``", line))
    return lines

def anchors(path):
    """The anchors of a page's headings (read with their inline code, which prose() blanks)."""
    seen, out, fence = {}, set(), False
    for line in open(path, encoding="utf-8"):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^#{1,6} +(.*?) *#* *$", line)
        if m:
            base = slug(m.group(1).replace("`", ""))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out

bad = 0
for page in sys.argv[1:]:
    for line in prose(page):
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(resolved):
                print(f"FAILED: {page}: link to {target}: {resolved} does not exist", file=sys.stderr)
                bad += 1
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                print(f"FAILED: {page}: link to {target}: {resolved} has no heading #{anchor}", file=sys.stderr)
                bad += 1
sys.exit(1 if bad else 0)
PY

[ "$fail" -eq 0 ] || exit 1
echo "docs pages: OK"
