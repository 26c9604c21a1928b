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
# Two groups run side by side, each in pytest processes of its own (docs/testing.md):
# - the e2e group (`-m e2e`): whole bot nodes called over SIP or WebRTC, mostly waiting on
#   calls that last as long as their audio; at normal priority, as a node on a phone line;
# - under `nice`: tests/telephony, then everything else. The in-process SIP endpoint tests
#   keep a process of their own: they create and destroy pjsua2's library dozens of times,
#   and beside the in-process model tests (torch, CTranslate2, onnxruntime, PyAV) pjsua2
#   crashed at library start in 2 of about 8 runs (docs/testing.md).
# Exit status 5 (nothing selected, e.g. by -k) from a process is no failure unless every
# process selected nothing.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pytest=(.venv/bin/pytest -p no:cacheprovider)
run_e2e() {
    "${pytest[@]}" --basetemp "$work/e2e" "$@" -m e2e --ignore=tests/telephony
}
run_others() {
    local status=0
    nice -n 10 "${pytest[@]}" --basetemp "$work/telephony" "$@" tests/telephony || status=$?
    echo "telephony $status" >"$work/telephony.status"
    [[ -e $work/stopped ]] && return
    status=0
    nice -n 10 "${pytest[@]}" --basetemp "$work/others" "$@" -m "not e2e" \
        --ignore=tests/telephony || status=$?
    echo "others $status" >"$work/others.status"
}
echo "== pytest: the e2e group, beside tests/telephony then the others (output at the end)" >&2
# Each group in a process group of its own (job control), so that Ctrl-C or a stop can be
# passed on as an interrupt: pytest then tears its fixtures down (the servers and bot nodes
# it started) and the second group does not start.
set -m
run_others "$@" >"$work/others.log" 2>&1 &
others=$!
run_e2e "$@" &
e2e=$!
stop() {
    touch "$work/stopped"
    kill -INT -- "-$e2e" "-$others" 2>/dev/null || true
}
trap stop INT TERM
e2e_status=0
wait "$e2e" || e2e_status=$?
if [[ -e $work/stopped ]]; then
    wait "$e2e" "$others" || true
    cat "$work/others.log"
    exit 130
fi
wait "$others" || true
echo "== pytest: tests/telephony, then the others" >&2
cat "$work/others.log"
statuses=("$e2e_status")
for group in telephony others; do
    read -r _ code <"$work/$group.status" || code=1
    statuses+=("$code")
done
failed=0
selected=0
for code in "${statuses[@]}"; do
    if [[ $code -ne 0 && $code -ne 5 ]]; then failed=1; fi
    if [[ $code -ne 5 ]]; then selected=1; fi
done
echo "== pytest exit statuses: e2e ${statuses[0]}, telephony ${statuses[1]}, others ${statuses[2]}" >&2
if [[ $failed -ne 0 ]]; then exit 1; fi
if [[ $selected -eq 0 ]]; then exit 5; fi
