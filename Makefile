# hudi-flight: every target sets up its own virtual environment from pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv test demo bench bench-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,spark]"
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -n 2 -q $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/hudi-flight demo

bench: $(STAMP)
	$(PY) -m bench --size full

bench-quick: $(STAMP)
	$(PY) -m bench --size quick

clean:
	rm -rf $(VENV) build *.egg-info
