#!/usr/bin/env python3
"""Checks that the docs' code references exist, so that docs cannot drift from the code.

Scans README.md, CONTRIBUTING.md and docs/*.md for
  - repository paths (src/..., tests/..., scripts/..., tools/..., docs/..., scenarios/...,
    bench/..., fuzz/..., include/..., examples/..., cmake/..., .ci/...), also with a glob
    (`src/net/udp_driver.*`), braces (`include/mrc/{mrc.h,mrc_ctl.h}`) or a line number
    (`src/net/fabric.cc:120`);
  - programs: `build/bin/<name>` and the tool names mrc-<name> (a tools/<name>.cc or
    tools/<name> must exist);
  - Markdown links to local files ([text](file.md));
and reports every reference that names nothing. Placeholders (`<name>`, `NAME`, `...`) and
generated trees (build*/, out/) are not checked.
  scripts/check-docs.py            exit 1 and list the dangling references
"""
import glob
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOTS = ("src", "tests", "scripts", "tools", "docs", "scenarios", "bench", "fuzz", "include",
         "examples", "cmake", ".ci")
PATH_RE = re.compile(r"(?<![\w./-])((?:%s)/[\w./*{},+-]*[\w*}])" % "|".join(re.escape(r) for r in ROOTS))
BIN_RE = re.compile(r"build[\w-]*/bin/([\w-]+)")
TOOL_RE = re.compile(r"(?<![\w/.-])(mrc-[a-z][a-z0-9-]*)(?![\w.-]*[/=])")
LINK_RE = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# Paths in other repositories that the docs name as such ("OCP's `examples/benchmark`").
EXTERNAL = {"examples/benchmark"}
# Namespaces and fabric names of the docs' examples (mrc-h0, mrc-p0-l1, a fabric "mrc-x").
NAMESPACE_RE = re.compile(r"^mrc-(h\d+|p\d+-[ls]\d+|x)$")
# Names that look like tools but are not programs of this repository.
NOT_TOOLS = {"mrc-fabric-", "mrc-soak", "mrc-sim-"}


def expand_braces(text):
    m = re.search(r"\{([^{}]*)\}", text)
    if not m:
        return [text]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(text[:m.start()] + alt + text[m.end():]))
    return out


def path_exists(ref):
    ref = ref.rstrip(".,;:")
    ref = re.sub(r":\d+(-\d+)?$", "", ref)
    if "<" in ref or "NAME" in ref or "..." in ref or ref in EXTERNAL:
        return True
    if re.match(r"examples/[\w-]+$", ref) and tool_exists(ref.split("/")[1]):
        return True  # an example program, by the name it is built as
    for p in expand_braces(ref):
        full = os.path.join(REPO, p)
        if any(c in p for c in "*?["):
            if not glob.glob(full):
                return False
        elif not os.path.exists(full):
            return False
    return True


def tool_exists(name):
    """A program of build/bin: tools/<name>.cc or tools/<name> (a script), or an example
    (examples/<name>.c)."""
    return (os.path.exists(os.path.join(REPO, "tools", name + ".cc")) or
            os.path.exists(os.path.join(REPO, "tools", name)) or
            bool(glob.glob(os.path.join(REPO, "examples", name + ".c*"))))


def main():
    files = [os.path.join(REPO, f) for f in ("README.md", "CONTRIBUTING.md")]
    files += sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
    bad = []
    for f in files:
        rel = os.path.relpath(f, REPO)
        with open(f, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                for m in PATH_RE.finditer(line):
                    if not path_exists(m.group(1)):
                        bad.append(f"{rel}:{lineno}: no such path: {m.group(1)}")
                for m in BIN_RE.finditer(line):
                    name = m.group(1)
                    if name.startswith(("test_", "fuzz_")) or name in ("engine_bench", "crc32_bench"):
                        continue
                    if not tool_exists(name):
                        bad.append(f"{rel}:{lineno}: no such program: build/bin/{name}")
                for m in TOOL_RE.finditer(line):
                    name = m.group(1)
                    if name in NOT_TOOLS or name.endswith("-") or NAMESPACE_RE.match(name):
                        continue
                    if not tool_exists(name):
                        bad.append(f"{rel}:{lineno}: no such tool: {name} (tools/{name}.cc)")
                for m in LINK_RE.finditer(line):
                    target = m.group(1)
                    if re.match(r"^[a-z]+:", target):
                        continue
                    full = os.path.normpath(os.path.join(os.path.dirname(f), target))
                    if not os.path.exists(full):
                        bad.append(f"{rel}:{lineno}: broken link: {target}")
    for b in bad:
        print(b)
    print(f"check-docs: {len(files)} files, {len(bad)} dangling reference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
