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
# The in-process SIP endpoint tests run first, in a pytest process of their own. They create
# and destroy pjsua2's library dozens of times in one process (production starts it once
# per worker process); in the same process as the in-process model tests (torch,
# CTranslate2, onnxruntime, PyAV loaded), pjsua2 crashed at library start (a segfault in
# codec enumeration) in 2 of about 8 full runs. A heap corruption from media ports freed
# while the media clock ran was found and fixed since; the crash at start is not explained
# by it, so the separation stays (docs/testing.md).
echo "== pytest: tests/telephony" >&2
status=0
.venv/bin/pytest -p no:cacheprovider "$@" tests/telephony || status=$?
# 5: arguments such as -k selected nothing there; the second run must still select tests.
if [[ $status -ne 0 && $status -ne 5 ]]; then exit "$status"; fi
echo "== pytest: the rest" >&2
exec .venv/bin/pytest -p no:cacheprovider "$@" --ignore=tests/telephony
