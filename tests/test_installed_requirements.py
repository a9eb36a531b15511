"""The packages Conveyor's extras pull in agree with each other, as installed here.

``pip check`` reads only each distribution's unconditional requirements: it never looks at
the ones an extra adds (``tritonclient[grpc]``'s ``protobuf<7``, ``ray[serve]``'s
``grpcio-reflection``), which is where the extras collide. This walks the requirements from
``conveyor[test]`` (every extra, tritonclient and the tools) down, evaluating each marker with
the extras actually asked for, and checks each one against the version installed. A version
bound in pyproject.toml that lets pip pick an incompatible set fails here, not in a user's
environment.
"""

from __future__ import annotations

import importlib.metadata as metadata

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

ROOT_REQUIREMENT = "conveyor[test]"


def _installed() -> dict[NormalizedName, metadata.Distribution]:
    found: dict[NormalizedName, metadata.Distribution] = {}
    for distribution in metadata.distributions():
        # The first on sys.path wins, as for an import.
        found.setdefault(canonicalize_name(distribution.metadata["Name"]), distribution)
    return found


def applies(requirement: Requirement, extras: frozenset[str]) -> bool:
    """Whether ``requirement`` holds for its distribution installed with ``extras``."""
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in ("", *extras))


def unmet_requirements(root: str) -> tuple[list[str], int]:
    """What is unmet below ``root`` (a requirement string), and how many (distribution,
    extras) pairs were walked."""
    installed = _installed()
    problems: list[str] = []
    seen: set[tuple[NormalizedName, frozenset[str]]] = set()
    start = Requirement(root)
    pending = [(canonicalize_name(start.name), frozenset(start.extras))]
    while pending:
        name, extras = pending.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        distribution = installed.get(name)
        assert distribution is not None, f"{name} is not installed (pip install '.[test]')"
        asked = f"{name}[{','.join(sorted(extras))}]" if extras else name
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if not applies(requirement, extras):
                continue
            dependency = installed.get(canonicalize_name(requirement.name))
            if dependency is None:
                problems.append(f"{asked} requires {requirement}: not installed")
                continue
            if not requirement.specifier.contains(dependency.version, prereleases=True):
                problems.append(
                    f"{asked} requires {requirement}, but {dependency.metadata['Name']} "
                    f"{dependency.version} is installed"
                )
            pending.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return problems, len(seen)


def test_every_requirement_below_conveyor_test_is_met() -> None:
    problems, walked = unmet_requirements(ROOT_REQUIREMENT)
    # The walk reached the extras' packages (ray, tritonclient, opentelemetry, ...).
    assert walked > 50, walked
    assert not problems, "\n".join(problems)


def test_the_walk_reads_extras_that_pip_check_ignores() -> None:
    # tritonclient[grpc] adds protobuf<7 only under its extra: asked with the extra, it holds.
    under_grpc = Requirement("protobuf<7.0,>=6.30.0; extra == 'grpc'")
    assert applies(under_grpc, frozenset({"grpc"}))
    assert not applies(under_grpc, frozenset())
    assert not applies(under_grpc, frozenset({"http"}))
    assert not applies(Requirement("uvloop; sys_platform == 'win32'"), frozenset())
    # And this environment's tritonclient declares it so (else the check above tests nothing).
    tritonclient = _installed()[canonicalize_name("tritonclient")]
    declared = [Requirement(line) for line in tritonclient.requires or []]
    assert any(r.name == "protobuf" and not applies(r, frozenset()) for r in declared)
