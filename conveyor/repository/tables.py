"""The check every table of a model's config shares: its keys are the ones it knows."""

from __future__ import annotations

from collections.abc import Collection, Iterable


def unknown_key(table: Iterable[str], known: Collection[str], where: str | None) -> str | None:
    """The sentence naming ``table``'s first unknown key (sorted, so a file with two typos
    names the same one each time) and the known ones, or None when every key is known.

    ``where``: the table, as the user wrote it (``[sequence_batching]``, ``steps[2]``);
    None for the config's top level.
    """
    unknown = sorted(set(table) - set(known))
    if not unknown:
        return None
    place = "unknown config key" if where is None else "unknown key"
    within = "" if where is None else f" in {where}"
    return f"{place} {unknown[0]!r}{within}; known keys are {', '.join(sorted(known))}"
