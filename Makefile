# Two commands set up a fresh machine from nothing:
#   make run   - create .venv, install everything (offline models included), start the app (:7860)
#   make test  - same set-up, then the whole test suite
# and one builds the Hugging Face Space (docs/SPACE.md):
#   make space - write the Space's folder to $(SPACE_OUT)
# The set-up is made for Python 3.11, the version it is tested on (CI and the Space); the
# package itself needs 3.11 or later.
PYTHON ?= python3
PYTHON_VERSION = 3.11
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_VERBOSITY ?= error
export PYTHONUNBUFFERED = 1
# Packages are installed without bytecode (pip --no-compile: compiling all of site-packages, about
# 20,000 files, is half of the set-up) and each module is compiled once, when a process first
# imports it. That needs bytecode to be written, so an inherited PYTHONDONTWRITEBYTECODE is dropped
# here: with it, every process would compile everything it imports, every time.
unexport PYTHONDONTWRITEBYTECODE

SPACE_OUT ?= out/space

.PHONY: run test setup demo bench clean chromium space space-check

# The interpreter the venv is (or will be) made from; the set-up stops first, in one line,
# when it is not $(PYTHON_VERSION) (expanded only when the venv is to be installed).
SETUP_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
SETUP_PY_FOUND = $(shell $(SETUP_PY) -c 'import platform; print(platform.python_version())' 2>/dev/null)
SETUP_PY_ERROR = the set-up needs Python $(PYTHON_VERSION) (the package needs 3.11 or later; the set-up is tested on 3.11 only), \
  and $(SETUP_PY) is $(or $(SETUP_PY_FOUND),not found): run 'make PYTHON=python$(PYTHON_VERSION)' \
  (after 'make clean' if $(VENV) exists)

$(STAMP): requirements.txt requirements-ray.txt requirements-nodeps.txt requirements-dev.txt
	$(if $(filter $(PYTHON_VERSION).%,$(SETUP_PY_FOUND)),,$(error $(SETUP_PY_ERROR)))
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile torch==2.13.0
	$(PY) -m pip install -q --no-compile -r requirements.txt -r requirements-ray.txt -r requirements-dev.txt
	$(PY) -m pip install -q --no-compile --no-deps -r requirements-nodeps.txt
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(PY) app.py

demo: setup
	$(PY) -m wash generate --provider smollm2:kgw:15485863 --provider gemma3:aar:42 \
	  --provider smollm2:dipmark:7 --max-new-tokens 64 --seed 0 \
	  --prompt "The old lighthouse keeper had kept a diary for forty years, and in it"

# Browser tests drive Debian's Chromium (never a downloaded browser).
chromium:
	@test -x /usr/bin/chromium || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "browser tests need /usr/bin/chromium: run 'sudo apt-get install chromium'" >&2; exit 1; }

# Two pytest workers (pytest-xdist): much of the suite waits on subprocesses, servers
# and the browser rather than computing, and its long tests (the looping-text nulls,
# the cache rebuild) no longer run back to back. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: setup chromium
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal

bench: setup
	$(PY) -m wash bench

space: setup
	$(PY) -m wash space --out $(SPACE_OUT)

# A fresh venv from the Space's requirements.txt alone, the app started from the folder (docs/SPACE.md).
space-check: setup
	$(PY) -m tools.space_check

clean:
	rm -rf $(VENV) .pytest_cache
