#!/usr/bin/env bash
# The test command: installs what the tests need, then lint, types and the test suite.
# Extra arguments go to pytest (e.g. `bash infra/test.sh -k barge`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash infra/install.sh --test
echo "== ruff" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy" >&2
.venv/bin/mypy
echo "== pytest" >&2
exec .venv/bin/pytest -p no:cacheprovider "$@"
