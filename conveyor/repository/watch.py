"""What changed in a model repository since the engine last acted on it (poll mode).

A model's *fingerprint* is the path, size and modification time (ns) of every file under
its folder, and the path of every folder in it. Sizes and mtimes, not content hashes: a
scan runs every few seconds over models that may be gigabytes, and hashing would read all
of them each time; any write, copy or ``mv`` of a file changes its mtime or size, which is
all we need to know.

A change is reported only once **two consecutive scans agree** on the new fingerprint, so a
model whose files are still being written (a copy in progress changes size from scan to scan)
is left alone until the writer has finished. The cost is one extra poll interval of delay.

Nothing here loads a model or touches the engine: :class:`RepositoryWatch` only answers
"which model folders changed (or appeared, or went away) and have settled".
"""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.repository.checks import MODEL_NAME

# (relative path, size in bytes and mtime in ns; -1 and 0 for a folder), sorted by path.
Fingerprint = tuple[tuple[str, int, int], ...]


def model_fingerprint(folder: Path) -> Fingerprint | None:
    """The fingerprint of one model folder; None if it is not there (any more)."""
    if not folder.is_dir():
        return None
    entries: list[tuple[str, int, int]] = []
    for root, dirs, files in os.walk(folder):
        # Python writes a model's bytecode beside its model.py on the first load; that is
        # not a change to the model, and counting it would reload every Python model once.
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in (*dirs, *files):
            path = os.path.join(root, name)
            try:
                stat = os.stat(path)  # follows links: a re-pointed symlink is a change
            except OSError:
                continue  # removed mid-walk, or a dangling link: the next scan sees the rest
            relative = os.path.relpath(path, folder)
            if name in dirs:
                # A folder counts by its presence only: its mtime moves whenever anything is
                # created in it (bytecode too), and its files are listed on their own.
                entries.append((relative, -1, 0))
            else:
                entries.append((relative, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(entries))


def repository_fingerprints(root: Path) -> dict[str, Fingerprint]:
    """Every model folder of the repository at ``root`` and its fingerprint."""
    found: dict[str, Fingerprint] = {}
    try:
        children = sorted(root.iterdir())
    except OSError:
        return found
    for child in children:
        if child.is_dir() and MODEL_NAME.fullmatch(child.name):
            fingerprint = model_fingerprint(child)
            if fingerprint is not None:
                found[child.name] = fingerprint
    return found


class RepositoryWatch:
    """Remembers each model's fingerprint as last acted on, and reports settled changes.

    ``scan()`` returns the names of the models whose folder was added, changed or removed
    since they were last reported, and whose new state was the same in this scan and the
    one before (settled). A name whose folder is gone is reported once, then forgotten.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        # What the engine serves now (taken before the first load, so a change made while
        # the models load is seen by the first scans).
        self._applied: dict[str, Fingerprint] = repository_fingerprints(root)
        # What the last scan saw for models that differ from _applied (None: folder gone).
        self._seen: dict[str, Fingerprint | None] = {}

    def scan(self) -> list[str]:
        current = repository_fingerprints(self.root)
        settled: list[str] = []
        for name in sorted(set(current) | set(self._applied) | set(self._seen)):
            now = current.get(name)
            if now == self._applied.get(name):
                self._seen.pop(name, None)  # back as it was (or a change undone): nothing to do
                continue
            if name in self._seen and self._seen[name] == now:
                settled.append(name)
                del self._seen[name]
                if now is None:
                    self._applied.pop(name, None)
                else:
                    self._applied[name] = now
            else:
                self._seen[name] = now  # new, or still changing: look again next scan
        return settled
