"""List every public name Triton's python_backend gives a model in ``triton_python_backend_utils``.

    python scripts/pb_utils_names.py PYTHON_BACKEND [--rev REV] > tests/triton/pb_utils_names.txt

``PYTHON_BACKEND`` is a python_backend checkout, or a bare git repository of it (then the
files are read at ``--rev``, default HEAD). The names come from two files, read as text:

- ``src/pb_stub.cc``: the C++ module bound with pybind11 (``PYBIND11_EMBEDDED_MODULE``).
  Each ``py::class_<...>(scope, "Name")`` is a class; its chained or named ``.def("x"``,
  ``.def_static``, ``.def_property_readonly_static`` are ``Name.x``; a ``py::enum_`` with
  ``.export_values()`` puts its values on its scope (``TritonError.UNKNOWN``) and its own
  name there too; ``module.attr("A").attr("B") =`` is ``A.B``; ``module.def("f"`` is ``f``;
  ``py::register_exception<...>(module, "E")`` is ``E``. What the source marks "not part of
  the public API" is left out.
  Of the module's other names, only those the stub copies into
  ``triton_python_backend_utils`` (``py::setattr(python_backend_utils, "X", ...)``) count.
- ``src/resources/triton_python_backend_utils.py``: its top-level functions, classes with
  their public methods, and constants (parsed with ``ast``).

Classes a model only meets as objects (``InferenceResponseSender`` from
``get_response_sender()``, ``ResponseIterator`` from ``exec(decoupled=True)``, ``Metric``)
are listed under their bound names all the same, so their methods are checked too.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

STUB = "src/pb_stub.cc"
UTILS = "src/resources/triton_python_backend_utils.py"
PRIVATE_MARK = "not part of the public API"

CLASS = re.compile(r'py::class_<[^;]*?>\s*(\w+)?\s*\(\s*(\w+)\s*,\s*"(\w+)"\s*\)')
ENUM = re.compile(r'py::enum_<[^>]*>\s*\(\s*(\w+)\s*,\s*"(\w+)"\s*\)')
METHOD = re.compile(r'(\w+)?\s*\.\s*(def|def_static|def_property_readonly_static)\s*\(\s*"(\w+)"')
VALUE = re.compile(r'\.value\s*\(\s*"(\w+)"')
ATTR = re.compile(r'module\.attr\("(\w+)"\)\.attr\("(\w+)"\)\s*=')
COPIED = re.compile(r'py::setattr\(\s*python_backend_utils\s*,\s*"(\w+)"')
EXCEPTION = re.compile(r'py::register_exception<[^>]*>\s*\(\s*module\s*,\s*"(\w+)"')


def read(source: Path, rev: str, path: str) -> str:
    if (source / path).is_file():
        return (source / path).read_text()
    return subprocess.run(
        ["git", "-C", str(source), "show", f"{rev}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def statements(module_body: str) -> list[tuple[str, bool]]:
    """The module body cut into top-level statements (a ``;`` outside any bracket), each
    with whether the comment lines right before it mark it as not public."""
    out: list[tuple[str, bool]] = []
    comment: list[str] = []
    text: list[str] = []
    depth = 0
    for line in module_body.splitlines():
        stripped = line.strip()
        if not stripped and not text:
            continue
        if stripped.startswith("//"):
            if not text:
                comment.append(stripped)
            continue
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line)  # brackets in strings do not count
        text.append(line)
        for char in code:
            depth += char in "([{"
            depth -= char in ")]}"
            if char == ";" and depth == 0:
                out.append(("\n".join(text), any(PRIVATE_MARK in c for c in comment)))
                text, comment = [], []
    return out


def stub_names(source: str) -> set[str]:
    """The bound module's classes (with their members), and of its other module-level names
    those the stub copies into ``triton_python_backend_utils`` (``py::setattr``)."""
    names, classes = bound_names(source)
    copied = set(COPIED.findall(source))
    return {n for n in names if "." in n or n in classes or n in copied}


def bound_names(source: str) -> tuple[set[str], set[str]]:
    start = source.index("PYBIND11_EMBEDDED_MODULE")
    body = source[source.index("{", start) + 1 :]
    body = body[: body.index("\n}\n")]
    names: set[str] = set()
    classes: set[str] = set()
    scopes = {"module": ""}  # C++ variable -> the Python name it binds ("" = the module)
    for statement, private in statements(body):
        if private:
            continue
        found = CLASS.search(statement)
        current = ""
        if found:
            variable, scope, name = found.groups()
            current = qualified(scopes[scope], name)
            names.add(current)
            classes.add(current)
            if variable:
                scopes[variable] = current
        enum = ENUM.search(statement)
        if enum:
            scope, name = scopes[enum.group(1)], enum.group(2)
            if not name.startswith("_"):
                names.add(qualified(scope, name))
            if ".export_values()" in statement:
                names.update(qualified(scope, value) for value in VALUE.findall(statement))
        for variable, _, method in METHOD.findall(statement):
            owner = scopes.get(variable, current) if variable else current
            if variable == "module" and not found:
                owner = ""
            if not method.startswith("_") or (method.startswith("__") and method.endswith("__")):
                names.add(qualified(owner, method))
        for owner, attribute in ATTR.findall(statement):
            names.add(f"{owner}.{attribute}")
        names.update(EXCEPTION.findall(statement))
        classes.update(EXCEPTION.findall(statement))
    return names, classes


def qualified(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def utils_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            names.add(node.name)
            names.update(
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_")
            )
        elif isinstance(node, ast.Assign):
            names.update(
                target.id
                for target in node.targets
                if isinstance(target, ast.Name) and not target.id.startswith("_")
            )
    return names


def commit_of(source: Path, rev: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(source), "rev-parse", rev], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else "(not a git checkout)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python_backend", type=Path, help="checkout or bare git repository")
    parser.add_argument("--rev", default="HEAD", help="revision of a git repository")
    args = parser.parse_args()
    names = stub_names(read(args.python_backend, args.rev, STUB)) | utils_names(
        read(args.python_backend, args.rev, UTILS)
    )
    header = [
        "# Public names of Triton's triton_python_backend_utils, one per line: a module",
        "# attribute, or Class.member. Generated, do not edit; regenerate with",
        "#   python scripts/pb_utils_names.py <python_backend checkout or git dir>",
        "# from triton-inference-server/python_backend at commit",
        f"#   {commit_of(args.python_backend, args.rev)}",
        f"# ({STUB}'s pybind11 module and {UTILS}).",
    ]
    sys.stdout.write("\n".join([*header, *sorted(names)]) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
