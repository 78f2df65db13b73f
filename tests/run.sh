#!/usr/bin/env bash
# Installs what the tests need into .venv (Python deps; node-shim deps once it exists) and runs every test.
# Usage: bash tests/run.sh [extra pytest args]. Exit code: pytest's, except that "no tests ran" (5) fails.
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
fi
set +e
node_rc=0
if [ -f node-shim/package.json ]; then
  (cd node-shim && npm test)
  node_rc=$?  # pytest still runs, so one failing Node test never hides the Python suite
fi
.venv/bin/python -m pytest -p no:cacheprovider "$@"
rc=$?
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
