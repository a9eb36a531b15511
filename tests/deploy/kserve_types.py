"""KServe's published types, to check a manifest against: the ``kserve`` package's model
classes (``kserve.models.V1alpha1*``) and, for the Kubernetes types they name (``V1*``:
containers, probes, object metadata), the ``kubernetes`` package's pydantic models, which
refuse unknown fields.

Neither package is a dependency: ``kserve`` pulls in a whole model server. Their wheels
are fetched with ``pip download --no-deps`` (pinned versions) by the test command's
``python scripts/fetch_test_assets.py``, before the tests run, into :data:`FOLDER`; only
their model modules are imported, under stand-in parent packages so neither package's
``__init__`` (and its dependencies) runs.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

# Where the test command puts the unpacked wheels (CONVEYOR_TEST_ASSETS overrides).
ASSETS = os.environ.get("CONVEYOR_TEST_ASSETS") or Path.home() / ".cache/conveyor/test-assets"
FOLDER = Path(ASSETS) / "kserve-types"
KSERVE = "kserve==0.21.0"
KUBERNETES = "kubernetes==37.0.2"
STAND_INS = (
    "kserve",
    "kserve.models",
    "kubernetes",
    "kubernetes.client",
    "kubernetes.client.models",
)
PRIMITIVES: dict[str, Any] = {"str": str, "int": int, "bool": bool, "float": (int, float)}


class ManifestError(Exception):
    """A field the published types do not have, or a value of the wrong type."""


def download(folder: Path) -> None:
    """The two wheels, unpacked into ``folder``; RuntimeError when pip cannot fetch them."""
    wheels = folder / "wheels"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels),
         KSERVE, KUBERNETES],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"pip download {KSERVE} {KUBERNETES} failed: {done.stderr[-500:]}")
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(folder / "site")


def install_stand_ins(folder: Path) -> list[str]:
    """Parent packages whose ``__path__`` is the unpacked wheels'; returns the names added
    to ``sys.modules`` (the caller removes them, and every module imported under them)."""
    site = folder / "site"
    added = []
    for name in STAND_INS:
        if name in sys.modules:
            continue
        package = types.ModuleType(name)
        package.__path__ = [str(site.joinpath(*name.split(".")))]
        sys.modules[name] = package
        added.append(name)
    return added


def _module_name(type_name: str) -> str:
    """``V1alpha1ServingRuntimeSpec`` -> ``v1alpha1_serving_runtime_spec``."""
    found = re.fullmatch(r"(V\d+(?:alpha\d+|beta\d+)?)(\w+)", type_name)
    if found is None:
        raise ManifestError(f"{type_name!r} is not a KServe or Kubernetes type name")
    version, name = found.groups()
    # ObjectMeta -> object, meta; HTTPGetAction -> http, get, action
    words = re.findall(r"[A-Z]+(?=[A-Z][a-z]|$)|[A-Z]?[a-z0-9]+", name)
    return "_".join([version.lower(), *(word.lower() for word in words)])


def check(value: Any, type_name: str, where: str) -> None:
    """Raise ManifestError where ``value`` is not a ``type_name`` as KServe declares it."""
    if type_name.startswith("list["):
        if not isinstance(value, list):
            raise ManifestError(f"{where}: expected a list ({type_name}), got {value!r}")
        for index, item in enumerate(value):
            check(item, type_name[5:-1], f"{where}[{index}]")
    elif type_name.startswith("dict("):
        if not isinstance(value, dict):
            raise ManifestError(f"{where}: expected a mapping ({type_name}), got {value!r}")
        item_type = type_name[5:-1].split(", ", 1)[1]
        for key, item in value.items():
            check(item, item_type, f"{where}.{key}")
    elif type_name in PRIMITIVES:
        if not isinstance(value, PRIMITIVES[type_name]) or (
            type_name != "bool" and isinstance(value, bool)
        ):
            raise ManifestError(f"{where}: expected {type_name}, got {value!r}")
    elif re.match(r"V\d+(alpha|beta)\d+", type_name):
        _check_kserve(value, type_name, where)
    else:
        _check_kubernetes(value, type_name, where)


def _check_kserve(value: Any, type_name: str, where: str) -> None:
    module = importlib.import_module(f"kserve.models.{_module_name(type_name)}")
    cls = getattr(module, type_name)
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: expected a {type_name} mapping, got {value!r}")
    by_json = {json: attr for attr, json in cls.attribute_map.items()}
    unknown = sorted(set(value) - set(by_json))
    if unknown:
        raise ManifestError(
            f"{where}: {type_name} has no field {unknown[0]!r}; it has {sorted(by_json)}"
        )
    for key, item in value.items():
        check(item, cls.openapi_types[by_json[key]], f"{where}.{key}")
    try:  # the class's own checks: required fields, allowed values
        cls(**{by_json[key]: item for key, item in value.items()})
    except ValueError as exc:
        raise ManifestError(f"{where}: {exc}") from None


def _check_kubernetes(value: Any, type_name: str, where: str) -> None:
    module = importlib.import_module(f"kubernetes.client.models.{_module_name(type_name)}")
    try:
        # model_validate, not from_dict: from_dict drops the fields it does not know.
        getattr(module, type_name).model_validate(value)
    except Exception as exc:  # pydantic's ValidationError: names the field
        raise ManifestError(f"{where}: not a valid {type_name}: {exc}") from None
