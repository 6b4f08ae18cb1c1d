# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Both create .venv if it is missing, install the project into it, and register its Jupyter kernel.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch==2.13.0 is a CPU wheel on the project's machines (found on local disk, no multi-GB CUDA build);
# on a GPU machine set TORCH_SPEC (e.g. TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu128").
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install demo test clean-runs

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH_SPEC)
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name repro --display-name "Python (repro)" >/dev/null
	touch $(STAMP)

demo: install
	$(VENV)/bin/repro run params/demo.yaml

test: install
	$(PY) -m pytest

clean-runs:
	rm -rf runs/
