# DIGITS Core: one-command setup, demo and tests. Needs Python 3.10+ (python3).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PLUGINS := plugins/data_images plugins/data_sunnybrook plugins/view_classification plugins/view_segmentation plugins/view_generic plugins/data_dicomweb plugins/view_detection plugins/data_volumes plugins/networks_backbones compat/digits6
PYTEST_ARGS ?=
COMPAT_QUIET := PYTHONWARNINGS="ignore:Compat editable installs"

.PHONY: setup demo lint test test-fast test-container clean

# A virtual environment with the core (and its test extras) and every bundled plugin, editable.
$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS))
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	# The test extra and the Ray extra: the Ray executor's tests start a real local Ray cluster.
	# editable_mode=compat: a plain path in a .pth file, which mypy follows (setuptools' default editable
	# install is an import hook that type checkers cannot see; docs/writing-plugins.md, Type checking).
	# setuptools calls that mode transitional in a banner per package: a known, documented choice, not printed.
	$(COMPAT_QUIET) $(BIN)/python -m pip install -q --config-settings editable_mode=compat -e ".[test,ray,export]" $(addprefix -e ,$(PLUGINS))
	# The tests decode real JPEG-LS / JPEG 2000 / RLE DICOM files: the Sunnybrook plugin's codecs extra.
	$(COMPAT_QUIET) $(BIN)/python -m pip install -q --config-settings editable_mode=compat -e "plugins/data_sunnybrook[codecs]"
	touch $(STAMP)

setup: $(STAMP)

# The main job: set up, then run the demo (real digits + synthetic Sunnybrook data, two datasets,
# two trained models, then the web UI; a second run reuses what exists). See scripts/demo.py.
DEMO_ARGS ?=
demo: setup
	$(BIN)/python scripts/demo.py $(DEMO_ARGS)

# Lint (ruff), type checks (mypy) and the manual (docs/ built with MkDocs; a broken link or anchor fails); settings and the backlog of ignores are in pyproject.toml.
lint: setup
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .
	$(BIN)/python -m mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -d build/site

# Set up, lint, then run the whole test suite (slow end-to-end tests included), the container
# built and run among them where podman can run (tests/test_container_run.py, about 4 minutes).
test: setup lint
	sh scripts/ensure-chromium.sh
	sh scripts/ensure-orthanc.sh
	sh scripts/ensure-podman.sh
	DIGITS_CONTAINER_TEST=1 $(BIN)/python -m pytest --durations=30 $(PYTEST_ARGS)

# The suite without the slow end-to-end tests, for quick local runs: one pytest-xdist worker per CPU,
# each test file kept on one worker (its module fixtures are built once).
test-fast: setup
	$(BIN)/python -m pytest -m "not slow" -n auto --dist loadfile $(PYTEST_ARGS)

# The container, built and run: the Dockerfile built with podman on a Debian base made by mmdebstrap
# (no image registry), then run with /data and /jobs from the host (tests/test_container_run.py:
# health check, token login, a dataset from /data, a model trained through the API, uid 1000).
# Installs podman/runc/mmdebstrap with apt-get as root when missing; the test's fixture runs
# scripts/build-container.sh. Also part of `test`; this target runs it alone.
test-container: setup
	sh scripts/ensure-podman.sh
	DIGITS_CONTAINER_TEST=1 $(BIN)/python -m pytest tests/test_container_run.py -s $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info plugins/*/*.egg-info compat/*/*.egg-info
