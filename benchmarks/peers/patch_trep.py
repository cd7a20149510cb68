#!/usr/bin/env python3
"""Mechanically port the trep 1.0.2 sdist (Python 2 era) to Python 3.8-3.12 / numpy >= 1.24.

Usage: python patch_trep.py /path/to/unpacked/trep-1.0.2   (run by install_trep.sh on a fresh copy)

trep is the thesis's reference implementation, used only as a benchmark peer
and to generate cross-check data; its source is never part of this repository:
install_trep.sh fetches the sdist from PyPI by name and this script patches it
at install time. Python sources are converted with lib2to3 (in the standard
library up to Python 3.12) first, then the fix-ups below are applied: C-API
renames of Python 2 names, PyCObject -> PyCapsule, the Python 3 module init,
inspect.getargspec and the removed numpy aliases. The numerical code (the C
core) is untouched apart from those API renames.
"""
import re
import subprocess
import sys
from pathlib import Path

root = Path(sys.argv[1]).resolve()
log = []


def sub(path, pattern, repl, count=0, flags=0, expect=True):
    p = root / path
    s = p.read_text()
    s2, n = re.subn(pattern, repl, s, count=count, flags=flags)
    if expect and n == 0:
        raise SystemExit(f"patch failed: {path}: {pattern!r}")
    p.write_text(s2)
    log.append(f"{path}: {n}x {pattern[:60]!r}")


# ---------------------------------------------------------------- C extension
cfiles = sorted((root / "trep").rglob("*.c")) + sorted((root / "trep").rglob("*.h"))
for f in cfiles:
    rel = f.relative_to(root)
    s = f.read_text()
    o = s
    # static type objects: Py2 header + ob_size -> PyVarObject_HEAD_INIT
    s = re.sub(r"PyObject_HEAD_INIT\(NULL\)\s*\n\s*0,\s*/\*\s*ob_size\s*\*/",
               "PyVarObject_HEAD_INIT(NULL, 0)", s)
    # X->ob_type -> Py_TYPE(X)
    s = re.sub(r"\b([A-Za-z_][A-Za-z0-9_]*)->ob_type\b", r"Py_TYPE(\1)", s)
    s = s.replace("PyInt_FromLong", "PyLong_FromLong")
    s = s.replace("PyInt_AsLong", "PyLong_AsLong")
    s = s.replace("PyInt_Check", "PyLong_Check")
    s = s.replace("PyString_FromString", "PyUnicode_FromString")
    s = s.replace("PyExc_StandardError", "PyExc_Exception")
    if s != o:
        f.write_text(s)
        log.append(f"{rel}: generic C-API renames")

# CObject -> Capsule (the header already has the capsule path behind '#if 1')
sub("trep/_trep/c_api.h", r"#if 1   // 2.6 compatibility for Todd", "#if 0   // py3: use capsule")
sub("trep/_trep/c_api.h",
    r"return PyCObject_FromVoidPtr\(\(void \*\)&trep_API_def, NULL\);",
    'return PyCapsule_New((void *)&trep_API_def, "trep._C_API", NULL);')

# module init: Py_InitModule3 -> PyModule_Create / PyInit__trep
sub("trep/_trep/_trep.c", r"PyMODINIT_FUNC init_trep\(void\)",
    "static struct PyModuleDef trep_moduledef = {\n"
    "    PyModuleDef_HEAD_INIT, \"_trep\", \"trep C core\", -1, CTrepMethods\n"
    "};\n\nPyMODINIT_FUNC PyInit__trep(void)")
sub("trep/_trep/_trep.c",
    r'm = Py_InitModule3\("_trep", CTrepMethods,\s*\n\s*"Example module that creates an extension type."\);',
    "m = PyModule_Create(&trep_moduledef);")
src = (root / "trep/_trep/_trep.c").read_text()
i = src.index("PyMODINIT_FUNC PyInit__trep(void)")
body = src[i:]
body = body.replace("return;", "return NULL;")
# final closing brace of the init function: return the module
j = body.rindex("}")
body = body[:j] + "    return m;\n}" + body[j + 1:]
(root / "trep/_trep/_trep.c").write_text(src[:i] + body)
log.append("trep/_trep/_trep.c: init returns PyObject*")

# ---------------------------------------------------------------- Python side
pyfiles = [str(p) for p in sorted((root / "trep").rglob("*.py"))] + [str(root / "setup.py")]
r = subprocess.run([sys.executable, "-W", "ignore", "-m", "lib2to3", "-w", "-n", "-j", "2"] + pyfiles,
                   capture_output=True, text=True)
if r.returncode != 0:
    print(r.stdout[-3000:], r.stderr[-3000:])
    raise SystemExit("2to3 failed")
log.append("2to3 -w on trep/**/*.py and setup.py")

# setup.py: StandardError / execfile
sub("setup.py", r"class GitDescribeError\(StandardError\)", "class GitDescribeError(Exception)", expect=False)
# (2to3 already turns execfile into exec(compile(...)))

# never run 'git describe' (it would pick up an enclosing repository)
sub("setup.py", r"def get_version_from_git\(\):\n", "def get_version_from_git():\n    raise GitDescribeError('disabled')\n")

# inspect.getargspec was removed in Python 3.11
for f in ("trep/frame.py", "trep/util.py"):
    sub(f, r"inspect\.getargspec\(func\)", "inspect.getfullargspec(func)")
    sub(f, r"spec\.keywords", "spec.varkw")

# numpy >= 1.24 removed the np.int / np.float / np.object aliases (they were the builtins)
for f in sorted((root / "trep").rglob("*.py")):
    t = f.read_text()
    t2 = re.sub(r"\bnp\.(int|float|object|bool)\b(?!\w)", r"\1", t)
    if t2 != t:
        f.write_text(t2)
        log.append(f"{f.relative_to(root)}: np.int/np.float/np.object -> builtins")

print("\n".join(log))
