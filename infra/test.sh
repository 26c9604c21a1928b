#!/usr/bin/env bash
# The test command: installs what the tests need, then lint, types and the test suite.
# Extra arguments go to pytest (e.g. `bash infra/test.sh -k barge`); with a test path
# among them, one pytest run of that path alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash infra/install.sh --test
echo "== ruff" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy" >&2
.venv/bin/mypy
# Four pytest processes run side by side (docs/testing.md):
# - the e2e group (`-m e2e`: whole bot nodes called over SIP or WebRTC, mostly waiting on
#   calls that last as long as their audio) in two processes:
#   - e2e: the tests that hold a node to a phone line's timing (barge-in, pauses), at
#     normal priority, as a node on a phone line;
#   - e2e-apart: the modules listed below, which start nodes or a Ray tier of their own and
#     check what a call leaves behind rather than its timing, under `nice -n 5`;
# - tests/telephony under `nice -n 5` (its SIP and RTP tests hold the endpoint to a frame's
#   timing: at `nice -n 10` on a machine running the models at a third of their speed, a
#   playout clear took three frames and a stop's BYE missed a sipp scenario's 20 s), then
#   the API fuzz tests (CPU-bound, about 3 min) under `nice -n 10`; and everything else
#   under `nice -n 10`. The in-process SIP endpoint tests keep a pytest run of their own:
#   they create and destroy pjsua2's library dozens of times, and beside the in-process
#   model tests (torch, CTranslate2, onnxruntime, PyAV) pjsua2 crashed at library start in
#   2 of about 8 runs (docs/testing.md).
# Exit status 5 (nothing selected, e.g. by -k) from a run is no failure unless every run
# selected nothing.
e2e_apart=(
    tests/e2e/test_tier_ray.py
    tests/e2e/test_trusted_answers.py
    tests/admin/test_node.py
    tests/admin/test_console_call.py
    tests/admin/test_console_try.py
    tests/admin/test_webrtc.py
    tests/calllog/test_call_row.py
    tests/testkit/test_v2v_wire.py
)
fuzz=tests/admin/test_openapi_fuzz.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pytest=(.venv/bin/pytest -p no:cacheprovider)
# Paths among the arguments (`bash infra/test.sh tests/bot/test_router.py`, or a test's
# node id): one pytest run of just those, not the same tests again in every group below.
for arg in "$@"; do
    if [[ $arg != -* && -e ${arg%%::*} ]]; then
        echo "== pytest: $*" >&2
        exec "${pytest[@]}" "$@"
    fi
done
group() {  # group NAME NICENESS PYTEST-ARGUMENTS...
    local name=$1 niceness=$2 status=0 began=$SECONDS
    shift 2
    nice -n "$niceness" "${pytest[@]}" --basetemp "$work/$name" "$@" || status=$?
    echo "$status" >"$work/$name.status"
    echo "$((SECONDS - began))" >"$work/$name.seconds"
}
names=(e2e e2e-apart telephony fuzz others)
echo "== pytest: e2e, e2e-apart, telephony then fuzz, others side by side (e2e live)" >&2
# Each group in a process group of its own (job control), so that Ctrl-C or a stop can be
# passed on as an interrupt: pytest then tears its fixtures down (the servers and bot nodes
# it started).
set -m
pids=()
group e2e 0 "$@" -m e2e --ignore=tests/telephony "${e2e_apart[@]/#/--ignore=}" &
pids+=($!)
group e2e-apart 5 "$@" -m e2e "${e2e_apart[@]}" >"$work/e2e-apart.log" 2>&1 &
pids+=($!)
{
    group telephony 5 "$@" tests/telephony
    [[ -e $work/stopped ]] || group fuzz 10 "$@" -m "not e2e" "$fuzz"
} >"$work/telephony.log" 2>&1 &
pids+=($!)
group others 10 "$@" -m "not e2e" --ignore=tests/telephony --ignore="$fuzz" >"$work/others.log" 2>&1 &
pids+=($!)
stop() {
    touch "$work/stopped"
    for pid in "${pids[@]}"; do kill -INT -- "-$pid" 2>/dev/null || true; done
}
trap stop INT TERM
for pid in "${pids[@]}"; do
    while ! wait "$pid"; do
        kill -0 "$pid" 2>/dev/null || break # ended (a trap interrupts wait: wait again)
    done
done
for log in e2e-apart telephony others; do
    echo "== pytest: $log" >&2
    cat "$work/$log.log"
done
if [[ -e $work/stopped ]]; then exit 130; fi
failed=0
selected=0
summary=""
for name in "${names[@]}"; do
    read -r code <"$work/$name.status" || code=1
    read -r took <"$work/$name.seconds" || took="?"
    summary+=" $name $code (${took} s)"
    if [[ $code -ne 0 && $code -ne 5 ]]; then failed=1; fi
    if [[ $code -ne 5 ]]; then selected=1; fi
done
echo "== pytest exit statuses (wall time):$summary; the command so far ${SECONDS} s" >&2
if [[ $failed -ne 0 ]]; then exit 1; fi
if [[ $selected -eq 0 ]]; then exit 5; fi
