"""Where a call's recording lies on disk, and which stored paths may be touched.

A call row holds its recording's path as text. Anything that reads or deletes that file
(the API serving it, the retention purge) first checks that the path lies inside the host's
recordings folder, so a row that names another file (a tampered database, a restored backup
of another host) can neither serve nor delete it.

A recording is written under a ``.part`` name and renamed to its own name when the call's
recorder closes it, so a file with the row's name is always complete (its WAV header says
its true length).
"""

from __future__ import annotations

from pathlib import Path

PART_SUFFIX = ".part"


def partial_path(path: Path) -> Path:
    """The name a recording has while it is being written."""
    return path.with_name(path.name + PART_SUFFIX)


def inside_folder(folder: Path | None, stored: str) -> Path | None:
    """``stored`` resolved, if it lies inside ``folder``; None if not (or no folder)."""
    if folder is None:
        return None
    path = Path(stored).resolve()
    return path if path.is_relative_to(folder.resolve()) else None
