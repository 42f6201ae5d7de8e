"""Runs many exports in one python process, so torch is imported once.

    export_batch.py MANIFEST

Each line of MANIFEST is `DIR<TAB>EXPORTER ARG...` (shell-quoted words):
scripts/EXPORTER.py's main(ARG... --out TMP/model.onnx) runs with its output
in TMP/export.log, TMP a fresh folder beside DIR, and TMP becomes DIR when
the export succeeded, as tests/cache.sh's cache_fill makes an entry.  A
failed export leaves nothing; the caller's own export of that entry then
reports the error.  Exit status 1 if any export failed.
"""
import contextlib
import importlib.util
import os
import shlex
import shutil
import sys
import tempfile

SCRIPTS = os.path.dirname(os.path.abspath(__file__))


def exporter(name, modules={}):
    if name not in modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, name + ".py"))
        modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[name])
    return modules[name]


def export_into(entry, words):
    """True when DIR (entry) exists afterwards, made by this export or another."""
    tmp = tempfile.mkdtemp(prefix=os.path.basename(entry) + ".tmp.", dir=os.path.dirname(entry))
    try:
        with open(os.path.join(tmp, "export.log"), "w") as log, \
                contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            exporter(words[0]).main(words[1:] + ["--out", os.path.join(tmp, "model.onnx")])
        os.rename(tmp, entry)
        return True
    except (Exception, SystemExit):
        shutil.rmtree(tmp, ignore_errors=True)
        return os.path.isdir(entry)


def main():
    sys.path.insert(0, SCRIPTS)
    ok = True
    for line in open(sys.argv[1]):
        entry, command = line.rstrip("\n").split("\t", 1)
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        if not os.path.isdir(entry):
            ok = export_into(entry, shlex.split(command)) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
