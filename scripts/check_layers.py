#!/usr/bin/env python3
"""The layering check: every folder of the C tree sits on a floor, and a file
may use only its own folder and the floors below it.

Two kinds of use are read:
  includes  every `#include "..."` of every tracked .c/.h file, resolved the
            way the compiler does (the including file's folder, then the
            include path of the Makefile);
  calls     the symbols each object file of BUILD takes from another one
            (`nm`: undefined in one, defined in the other).
It fails on a use that runs from a lower floor to a higher one, on a use
between two different folders of the same floor (peers stay independent),
and on a circle between files: files that use each other, directly or
round a ring (an include is a use of the header, a call a use of the file
that defines the function).

Usage: scripts/check_layers.py [BUILD]   (BUILD: the build folder, default
build; without its objects only the includes are checked).
Prints TAP: one check per rule, the offending uses as diagnostics."""
import os
import re
import subprocess
import sys

# Folder -> floor, lowest first (docs/architecture.md draws the same).
FLOORS = [
    ("runtime", 0), ("runtime/kernels", 0), ("runtime/kernels/x86", 0),
    ("runtime/kernels/arm_neon", 0),
    ("runtime/platform", 1),
    ("compiler/support", 2),
    ("compiler/ir", 3),
    ("compiler/onnx", 4), ("compiler/tokenizer", 4), ("compiler/passes", 4), ("compiler/codegen", 4),
    ("compiler/tools", 5), ("compiler/npu", 5),
    ("compiler/cli", 6),
]
# Folders that form one room: the runtime core and its kernel tables use one
# another's helpers (messages, tensor traits, the plan reader's checked
# arithmetic); within a room only circles between files are errors.
ROOM = {"runtime/kernels": "runtime", "runtime/kernels/x86": "runtime",
        "runtime/kernels/arm_neon": "runtime"}
FLOOR = dict(FLOORS)
INCLUDE_PATH = [".", "compiler", "runtime", "runtime/platform"]
SOURCE_ROOTS = ("runtime/", "compiler/")


def tracked_sources():
    out = subprocess.check_output(["git", "ls-files", "*.c", "*.h"], text=True)
    return [f for f in out.split() if f.startswith(SOURCE_ROOTS)]


def folder(path):
    return os.path.dirname(path)


def level(path):
    return FLOOR[folder(path)]


def room(path):
    d = folder(path)
    return ROOM.get(d, d)


def resolve(including, name, files):
    for base in [folder(including)] + INCLUDE_PATH:
        cand = os.path.normpath(os.path.join(base, name))
        if cand in files:
            return cand
    return None  # a system or generated header


def include_uses(files):
    fileset = set(files)
    uses = []
    pat = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        for name in pat.findall(text):
            target = resolve(f, name, fileset)
            if target:
                uses.append((f, target, "includes " + name))
    return uses


def nm_symbols(obj):
    out = subprocess.check_output(["nm", "--defined-only", "-g", obj], text=True)
    defined = {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}
    out = subprocess.check_output(["nm", "-u", obj], text=True)
    undefined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return defined, undefined


def call_uses(build, files):
    sources = [f for f in files if f.endswith(".c")]
    objs = {}
    for src in sources:
        obj = os.path.join(build, src[:-2] + ".o")
        if os.path.exists(obj):
            objs[src] = nm_symbols(obj)
    owner = {}
    for src, (defined, _) in objs.items():
        for sym in defined:
            owner.setdefault(sym, src)
    uses = []
    for src, (_, undefined) in objs.items():
        for sym in sorted(undefined):
            target = owner.get(sym)
            if target and target != src:
                uses.append((src, target, "calls " + sym))
    return uses, len(objs)


def wrong_way(uses):
    bad = []
    for src, dst, what in uses:
        if room(src) == room(dst):
            continue
        ls, ld = level(src), level(dst)
        if ld > ls:
            bad.append(f"{src} (floor {ls}) {what} from {dst} (floor {ld}): a use up the floors")
        elif ld == ls:
            bad.append(f"{src} {what} from {dst}: peers on floor {ls} use each other")
    return sorted(set(bad))


def circles(uses):
    """Strongly connected components of more than one file (Tarjan)."""
    graph = {}
    for a, b, _ in uses:
        if a != b:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = tracked_sources()
    n = 0

    def check(ok, what, details):
        nonlocal n
        n += 1
        print(f"{'ok' if ok else 'not ok'} {n} - {what}")
        for line in details:
            print(f"#   {line}")

    unplaced = sorted({folder(f) for f in files if folder(f) not in FLOOR})
    check(not unplaced, "every source folder has a floor", unplaced)
    if unplaced:
        print(f"1..{n}")
        return 1
    inc = include_uses(files)
    calls, n_objs = call_uses(build, files)
    check(n_objs > 0, f"object files of {build} read for calls ({n_objs})", [])
    bad = wrong_way(inc)
    check(not bad, f"no include runs up a floor or across peers ({len(inc)} includes)", bad)
    bad = wrong_way(calls)
    check(not bad, f"no call runs up a floor or across peers ({len(calls)} cross-file calls)", bad)
    rings = circles(inc + calls)
    check(not rings, "no circle between files", [" <-> ".join(r) for r in rings])
    print(f"1..{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
