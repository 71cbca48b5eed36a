# Two commands set up a fresh machine from nothing:
#   make run   - create .venv, install everything (offline models included), start the app (:7860)
#   make test  - same set-up, then the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_VERBOSITY ?= error
export PYTHONUNBUFFERED = 1

.PHONY: run test setup demo bench clean chromium

$(STAMP): requirements.txt requirements-nodeps.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -r requirements-nodeps.txt
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

clean:
	rm -rf $(VENV) .pytest_cache
