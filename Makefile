# heterps: `make demo` and `make test` work from a fresh clone (both run `setup` first).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-all bench lint docs clean

setup: $(STAMP)

# torch==2.13.0 is a local CPU wheel here; installing it first keeps pip from pulling a
# multi-GB CUDA build to satisfy the `torch` range. A torch already importable (e.g. a GPU
# build the user installed into the venv) is left alone.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	touch $(STAMP)

demo: setup
	$(VENV)/bin/heterps-sim simulate scenarios/dlrm-criteo1tb-aws.yaml

# Tests run in parallel workers (pytest-xdist, one per core; TEST_JOBS=1 runs them in this
# process) and print the suite's wall time at the end, whether it passed or not.
TEST_JOBS ?= auto

test: setup
	@start=$$(date +%s); $(PY) -m pytest -n $(TEST_JOBS); rc=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s wall ($$(nproc) cores)"; exit $$rc

test-all: setup
	@start=$$(date +%s); $(PY) -m pytest -n $(TEST_JOBS) -m ''; rc=$$?; \
	echo "make test-all: $$(( $$(date +%s) - start )) s wall ($$(nproc) cores)"; exit $$rc

bench: setup
	$(PY) benchmarks/bench_cost_model.py
	$(PY) benchmarks/bench_exact.py
	$(PY) benchmarks/des_speed.py
	$(PY) benchmarks/bench_headline.py
	$(PY) benchmarks/bench_planner.py
	$(PY) benchmarks/bench_exec.py
	$(PY) benchmarks/bench_tradeoff.py
	$(PY) benchmarks/bench_ps.py --quick
	$(PY) benchmarks/bench_hps.py

lint: setup
	$(VENV)/bin/ruff check heterps_sim heterps_exec tests benchmarks

# The manual as a site (mkdocs-material); --strict turns every warning (a broken link, a
# missing page, an API object that no longer exists) into an error.
docs: setup
	$(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build *.egg-info
