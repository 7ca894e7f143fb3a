#!/usr/bin/env bash
# The shell blocks of README.md and docs/*.md hold commands that work: every repository path they name exists (build/
# ones in the build), every ddptrain command line with a config parses (its config and overrides, run with
# --print-config; --help and --version run), and every ddprun flag is one ddprun's --help lists.
# Usage: tests/scripts/docs_commands_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(realpath "$1")
build=$(realpath "$2")
cd "$src"
python3 - "$build" README.md docs/*.md <<'PY'
import os, re, shlex, subprocess, sys

build, pages = sys.argv[1], sys.argv[2:]
ddprun_help = subprocess.run([f"{build}/ddprun", "--help"], capture_output=True, text=True).stdout
ddprun_flags = {f.replace("_", "-") for f in re.findall(r"(?<![\w-])--[a-z][a-z_-]*", ddprun_help)}
repo_roots = ("scripts/", "bench/", "build/", "configs/", "tests/", "docs/")


def commands(page):
    """Each command line of the page's sh/bash/console blocks: continuation lines joined, comments dropped."""
    fence, pending = None, ""
    for line in open(page, encoding="utf-8"):
        if line.startswith("```"):
            fence = line.strip()[3:] if fence is None else None
            continue
        if fence not in ("sh", "bash", "console"):
            continue
        line = pending + line.rstrip("\n")
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            yield line


def local(path):
    return os.path.join(build, path[len("build/"):]) if path.startswith("build/") else path


bad = checked = 0
for page in pages:
    for line in commands(page):
        try:
            words = shlex.split(line.rstrip("&").strip())
        except ValueError as e:
            print(f"FAILED: {page}: cannot split '{line}': {e}", file=sys.stderr)
            bad += 1
            continue
        for w in words:
            path = w.split("=", 1)[-1]
            if path.startswith(repo_roots) and "$" not in path and not os.path.exists(local(path)):
                print(f"FAILED: {page}: '{line}' names {path}, which does not exist", file=sys.stderr)
                bad += 1
        if "build/ddprun" in words:
            at = words.index("build/ddprun") + 1
            for w in words[at:]:
                if w == "--" or w.startswith("build/"):
                    break
                flag = w.split("=", 1)[0].replace("_", "-")
                if flag.startswith("--") and flag not in ddprun_flags:
                    print(f"FAILED: {page}: '{line}': ddprun --help lists no {flag}", file=sys.stderr)
                    bad += 1
            checked += 1
        if "build/ddptrain" in words:
            args = [w for w in words[words.index("build/ddptrain") + 1:] if "$" not in w]
            if not args or args[0] in ("CONFIG.toml",):
                continue
            if args[0] not in ("--help", "--version"):
                args.append("--print-config")
            r = subprocess.run([f"{build}/ddptrain"] + args, capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                print(f"FAILED: {page}: '{line}' exits {r.returncode}: {r.stderr.strip()[-300:]}", file=sys.stderr)
                bad += 1
            checked += 1
if checked < 10:
    print(f"FAILED: only {checked} ddptrain/ddprun command lines found in the docs", file=sys.stderr)
    bad += 1
print(f"docs commands: {checked} ddptrain/ddprun command lines checked, {bad} failures")
sys.exit(1 if bad else 0)
PY
