# Sourced by scripts/app and scripts/test: make .venv and install the project into it when needed.
# PYTHON picks the interpreter for a new .venv (default python3; Lockgate needs 3.11 or newer).

ensure_venv() {
  local extras="$1" stamp_name="$2"
  local python="${PYTHON:-python3}"
  if [ ! -x .venv/bin/python ]; then
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "lockgate: $python is missing or older than 3.11; install Python 3.11+ or run with PYTHON=/path/to/python3.11" >&2
      exit 2
    fi
    "$python" -m venv .venv
  fi
  # Reinstall only when pyproject.toml changed since the last install of this kind.
  local stamp=".venv/.lockgate-$stamp_name"
  local wanted
  wanted="$(.venv/bin/python -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())')"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    echo "Installing Lockgate$extras into .venv (log: .venv/pip-install.log) ..." >&2
    if ! .venv/bin/python -m pip install -e ".$extras" > .venv/pip-install.log 2>&1; then
      tail -n 30 .venv/pip-install.log >&2
      echo "lockgate: installing into .venv failed; the full log is .venv/pip-install.log" >&2
      exit 1
    fi
    echo "$wanted" > "$stamp"
  fi
  # Bytecode for Lockgate's own modules, written even where PYTHONDONTWRITEBYTECODE is set: every process it
  # starts (the engine child, workers, each CLI command) then loads them instead of compiling them again
  # (about 0.2 s of CPU a command). Up-to-date files are skipped; stale ones are still recompiled by Python.
  .venv/bin/python -m compileall -q -j 0 engine app canvas > /dev/null || true
}
