#!/usr/bin/env bash
# Installs what the tests need into .venv (Python deps; node-shim deps once it exists; Debian's chromium for
# the browser tests and bubblewrap for the check sandbox, with apt-get as root or through passwordless sudo)
# and runs ruff, mypy, then every test.
# Usage: bash tests/run.sh [extra pytest args]. Exit code: 1 on a ruff or mypy finding (no tests run), else
# pytest's, except that "no tests ran" (5) fails.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v git >/dev/null || { echo "tests/run.sh: git is required" >&2; exit 1; }
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
if [ -f node-shim/package.json ]; then
  command -v npm >/dev/null || { echo "tests/run.sh: npm is required for node-shim tests" >&2; exit 1; }
  # The Node tests drive the engine installed above (and its Python, for the scripted provider helper).
  export SPOTPATCH_AGENT_COMMAND="${SPOTPATCH_AGENT_COMMAND:-$PWD/.venv/bin/spotpatch-agent}"
  export SPOTPATCH_PYTHON="${SPOTPATCH_PYTHON:-$PWD/.venv/bin/python}"
  (cd node-shim && npm ci --no-audit --no-fund --loglevel=error)
  # `npm ci` does not build the plugin (its `prepack` builds on `npm pack` only): dist/ is built here, with the
  # plugin tarball and the vite.config editor `spotpatch-agent init` uses (spotpatch_agent/init/assets/), before
  # pytest (demo --serve serves dist/, tests/init installs the tarball) and the Node suite start side by side:
  # neither then builds node-shim/ while the other reads it.
  node node-shim/scripts/pack-assets.mjs --out spotpatch_agent/init/assets >/dev/null
  # The overlay's browser tests drive Debian's chromium through playwright-core: never a downloaded browser.
  export SPOTPATCH_CHROMIUM="${SPOTPATCH_CHROMIUM:-/usr/bin/chromium}"
  if [ ! -x "$SPOTPATCH_CHROMIUM" ]; then
    no_chromium() {
      echo "tests/run.sh: the browser tests need Chromium at $SPOTPATCH_CHROMIUM: $1." >&2
      echo "  Install Debian's package (apt-get install chromium) as root, or point SPOTPATCH_CHROMIUM at a Chromium binary." >&2
      exit 1
    }
    [ "$SPOTPATCH_CHROMIUM" = /usr/bin/chromium ] || no_chromium "no such executable"
    command -v apt-get >/dev/null || no_chromium "no apt-get on this system"
    if [ "$(id -u)" -eq 0 ]; then
      as_root=()
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      as_root=(sudo -n)  # -n: never prompt (CI has no tty)
    else
      no_chromium "not root, and sudo is unavailable or needs a password"
    fi
    echo "tests/run.sh: installing Debian's chromium for the browser tests (apt-get install chromium)…" >&2
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
    [ -x "$SPOTPATCH_CHROMIUM" ] || no_chromium "apt-get installed chromium but $SPOTPATCH_CHROMIUM is still missing"
  fi
fi
# node-shim's types and lint, before its tests: `tsc --noEmit` (strict) on the plugin and the overlay, then ESLint
# with type information (node-shim/eslint.config.mjs). A finding stops the run here, non-zero.
if [ -f node-shim/package.json ]; then
  echo "tests/run.sh: node-shim types and lint (npm run lint)…" >&2
  if ! (cd node-shim && npm run --silent lint); then
    echo "tests/run.sh: node-shim's types or lint failed (cd node-shim && npm run lint)" >&2
    exit 1
  fi
fi
# Checks run confined (docs/security.md §4, *Check sandbox*): on Linux that is Debian's bubblewrap, installed
# like chromium above. Without it every test that runs a check would fail closed (sandbox: "required").
if [ "$(uname -s)" = Linux ] && [ ! -x /usr/bin/bwrap ]; then
  no_bwrap() {
    echo "tests/run.sh: checks run in a sandbox and need bubblewrap at /usr/bin/bwrap: $1." >&2
    echo "  Install Debian's package (apt-get install bubblewrap) as root." >&2
    exit 1
  }
  command -v apt-get >/dev/null || no_bwrap "no apt-get on this system"
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
  else
    no_bwrap "not root, and sudo is unavailable or needs a password"
  fi
  echo "tests/run.sh: installing Debian's bubblewrap for the check sandbox (apt-get install bubblewrap)…" >&2
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
  [ -x /usr/bin/bwrap ] || no_bwrap "apt-get installed bubblewrap but /usr/bin/bwrap is still missing"
fi
# Lint and types before any test (README, *Lint and types*): a finding fails the run, and says which tool.
lint_failed=""
.venv/bin/ruff check --quiet || lint_failed="ruff check"  # every Python file .gitignore does not exclude
.venv/bin/mypy || lint_failed="${lint_failed:+$lint_failed and }mypy"  # what it checks: [tool.mypy], pyproject.toml
if [ -n "$lint_failed" ]; then
  echo "tests/run.sh: $lint_failed reported findings (above); no tests were run" >&2
  exit 1
fi
set +e
node_rc=0
node_pid=""
if [ -f node-shim/package.json ]; then
  # The Node suite runs next to pytest (both mostly wait on subprocesses and the browser; one after the other
  # they take longer than CI's budget on 2 cores). Its report is printed whole when it ends, so the two
  # outputs never interleave; a failing Node test never hides the Python suite.
  node_log=$(mktemp "${TMPDIR:-/tmp}/spotpatch-node-tests.XXXXXX")
  (cd node-shim && npm test) >"$node_log" 2>&1 &
  node_pid=$!
  trap 'kill "$node_pid" 2>/dev/null; exit 130' INT TERM
fi
.venv/bin/python -m pytest -p no:cacheprovider "$@"
rc=$?
if [ -n "$node_pid" ]; then
  wait "$node_pid"
  node_rc=$?
  echo "---- node-shim tests (npm test) ----"
  cat "$node_log"
  rm -f "$node_log"
fi
set -e
if [ "$rc" -eq 5 ]; then
  echo "tests/run.sh: pytest collected no tests — failing on purpose" >&2
  exit 1
fi
if [ "$node_rc" -ne 0 ]; then
  echo "tests/run.sh: the node-shim tests failed (exit $node_rc)" >&2
  [ "$rc" -eq 0 ] && rc=$node_rc
fi
exit "$rc"
