"""A rolling restart of two nodes under calls: does any call fail?

    .venv/bin/python -m bench.rolling_restart                 # 2 calls/s, 6 s each, ~40 s
    .venv/bin/python -m bench.rolling_restart --rate 3 --hold-s 8

The run itself (two nodes behind a failover trunk played by sipp, each rolled in turn) is
``testkit.rolling_restart``, which the test runs too; its docstring says what is reported.
The run passes when no call failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from testkit.rolling_restart import drive


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rolling_restart", description=__doc__)
    parser.add_argument("--rate", type=float, default=2.0, help="calls/s")
    parser.add_argument("--hold-s", type=float, default=6.0, help="each call's length")
    parser.add_argument("--attempts-s", type=float, default=30.0, help="seconds of new calls")
    parser.add_argument("--max-calls", type=int, default=18, help="per node")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sb-bench-roll-"))
    try:
        result = asyncio.run(drive(args, tmp))
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
    print(json.dumps(result, indent=2))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
