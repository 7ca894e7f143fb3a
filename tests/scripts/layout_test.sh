#!/usr/bin/env bash
# docs/layout.md and ARCHITECTURE.md against the sources: every folder of the layout table exists and every folder of
# sources has a row; each file a row names is in its folder; every #include of a project folder is one the row allows
# (the floors point down); every path the two pages name exists, and every function, class or variable they name in
# backticks is in the sources.
# Usage: tests/scripts/layout_test.sh SOURCE_DIR
set -euo pipefail
cd "$(realpath "$1")"
python3 - <<'PY'
import glob, os, re, sys

bad = []
# Folders at the top that hold no part of the training code (their roles are the table's last paragraph).
NOT_ROOMS = {"tests", "bench", "examples", "cmake", "reference", "scripts", "configs", "docs", "build", "shared"}

rows = []  # (folder, what it holds, the includes cell), top floor first
for line in open("docs/layout.md", encoding="utf-8"):
    m = re.match(r"^\| `([a-z_]+)/` \|(.*)\|(.*)\|\s*$", line)
    if m:
        rows.append(m.groups())
folders = [f for f, _, _ in rows]
if len(folders) < 5:
    sys.exit(f"FAILED: docs/layout.md: read {len(folders)} folder rows from its table")

for f in folders:
    if not os.path.isdir(f):
        bad.append(f"docs/layout.md names {f}/, which does not exist")
for entry in sorted(os.listdir(".")):
    if entry.startswith(".") or entry in NOT_ROOMS or entry in folders or not os.path.isdir(entry):
        continue
    if glob.glob(f"{entry}/**/*.cpp", recursive=True) + glob.glob(f"{entry}/**/*.h", recursive=True):
        bad.append(f"{entry}/ holds sources but docs/layout.md has no row for it")

def files_under(folder):
    for dirpath, _, names in os.walk(folder):
        for n in names:
            yield os.path.join(dirpath, n)

for folder, holds, includes in rows:
    if not os.path.isdir(folder):
        continue
    present = {os.path.basename(p) for p in files_under(folder)}
    subfolders = {os.path.relpath(d, folder) + "/" for d, _, _ in os.walk(folder)}
    for name in re.findall(r"`([A-Za-z0-9_./]+\.(?:h|cpp)|[a-z_]+/)`", holds):
        if name not in present and name not in subfolders:
            bad.append(f"docs/layout.md: the {folder}/ row names {name}, which is not in {folder}/")
    if "every folder but" in includes:
        allowed = set(folders) - set(re.findall(r"`([a-z_]+)/`", includes))
    else:
        allowed = set(re.findall(r"`([a-z_]+)/`", includes))
    allowed |= {folder, "base"}
    for path in files_under(folder):
        if not path.endswith((".h", ".cpp")):
            continue
        for number, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
            m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
            if m and m.group(1) in folders and m.group(1) not in allowed:
                bad.append(f"{path}:{number}: includes {m.group(1)}/, which docs/layout.md does not allow {folder}/")

# What the sources spell: identifiers, and which files each appears in.
sources = [p for p in glob.glob("**/*", recursive=True)
           if p.split("/")[0] not in {"build", "shared"} and p.endswith((".h", ".cpp", ".py", ".sh", ".txt", ".cmake"))]
words, texts = {}, {}
for p in sources:
    texts[p] = open(p, encoding="utf-8", errors="replace").read()
    for w in set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", texts[p])):
        words.setdefault(w, set()).add(p)

def names_a_path(token):
    return token.split("/")[0] in folders and "/" in token

for page in ("ARCHITECTURE.md", "docs/layout.md"):
    text = open(page, encoding="utf-8").read()
    for token in set(re.findall(r"(?<![\w./-])([a-z_]+/[A-Za-z0-9_./-]*[A-Za-z0-9_/])", text)):
        if not names_a_path(token) or re.search(r"[A-Z]{3,}", token):  # a placeholder: optim/NAME.cpp
            continue
        p = token.rstrip("/")
        if not any(os.path.exists(p + ext) for ext in ("", ".h", ".cpp")):
            bad.append(f"{page} names {token}, which does not exist")
    for code in set(re.findall(r"`([^`\n]+)`", text)):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_~][A-Za-z0-9_]*)*)(?:\(\))?", code.strip())
        if not m:
            continue
        parts = m.group(1).split("::")
        # Code names only: a qualified name, a snake_case name or a CamelCase one (not plain words).
        if len(parts) == 1 and "_" not in parts[0] and not re.match(r"^[A-Z][a-z0-9]+[A-Z]", parts[0]):
            continue
        if len(parts) == 1:
            defined = parts[0] in words
        else:  # Class::member: spelled so, or the member declared in the files that define the class
            owner, member = parts[-2], parts[-1]
            qualified = "::".join(parts)
            defining = set()
            for p in words.get(owner, set()):
                if re.search(rf"\b(class|struct)\s+{owner}\b", texts[p]):
                    stem = os.path.splitext(p)[0]
                    defining |= {p, stem + ".h", stem + ".cpp"}
            declared = re.compile(rf"\b{re.escape(member)}\s*[(;={{,]")
            defined = any(qualified in texts[p] for p in words.get(member, set())) or \
                any(declared.search(texts[p]) for p in defining & words.get(member, set()))
        if not defined:
            bad.append(f"{page} names `{code}`, which the sources do not define")

for b in bad:
    print("FAILED:", b, file=sys.stderr)
if bad:
    sys.exit(1)
print(f"layout: {len(folders)} folders, their includes, and the names of ARCHITECTURE.md and docs/layout.md: OK")
PY
