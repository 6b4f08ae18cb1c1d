# Three commands do everything on a fresh machine: `make demo`, `make test` and `make lab`.
# All create .venv if it is missing, install the project into it, and register its Jupyter kernel.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch==2.13.0 is a CPU wheel on the project's machines (found on local disk, no multi-GB CUDA build);
# on a GPU machine set TORCH_SPEC (e.g. TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu128").
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install demo test lab clean-runs

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

# JupyterLab at the project root (so `runs/demo` in a notebook is the folder the file browser shows), on this
# machine only; kernels get CurveZMQ-encrypted connections, as `repro run` gives them.
lab: install
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir="$(CURDIR)" \
		--KernelManager.transport_encryption=auto

clean-runs:
	rm -rf runs/
