# Three commands do everything on a fresh machine: `make demo`, `make test` and `make lab`.
# All create .venv if it is missing, install exactly the locked environment into it (requirements.lock, with
# hashes, through uv), install the project itself (editable) and register its Jupyter kernel.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
LOCK := requirements.lock
# uv installs the lock; its own version is the lock's (it is a dev dependency), so `uv pip sync` keeps it
UV_VERSION := $(shell sed -n 's/^uv==\([^ ]*\).*/\1/p' $(LOCK))
# The lock pins torch's CPU build (torch==2.13.0+cpu). uv looks for it on this project's machines' disk when
# that folder is there, else on PyTorch's CPU wheel page (the same file).
TORCH_FIND_LINKS ?= $(firstword $(wildcard /opt/wheels) https://download.pytorch.org/whl/cpu/torch/)
# TORCH_SPEC and EXTRAS as the last install took them (.venv/.torch-spec, .venv/.extras) are the defaults: every
# later install keeps them, and other values given install again on an installed .venv too (the preflight's hints
# say `make install EXTRAS=vllm` to someone who has run make already); TORCH_SPEC= goes back to the lock's torch.
TORCH_SPEC_FILE := $(VENV)/.torch-spec
EXTRAS_FILE := $(VENV)/.extras
# A GPU machine replaces the locked CPU torch after the sync (reinstalled: `torch==2.13.0` alone is satisfied by
# 2.13.0+cpu, so give the build), and the install fails if torch is still the lock's, e.g.
#   make install TORCH_SPEC="torch==2.13.0+cu128 --index-url https://download.pytorch.org/whl/cu128"
# (the manifest, the card and `repro selfcheck` then say that torch differs from the lock).
TORCH_SPEC ?= $(strip $(file < $(TORCH_SPEC_FILE)))
# Optional extras installed on top of the lock, unlocked: EXTRAS=vllm (vLLM generation, a GPU machine).
EXTRAS ?= $(strip $(file < $(EXTRAS_FILE)))
LOCK_TORCH := torch==2.13.0+cpu
# after a TORCH_SPEC: the torch it left, and a failure where that is still the lock's
TORCH_CHECK := import importlib.metadata as m, sys; v = m.version('torch'); print('torch', v); sys.exit(v == \
	'$(patsubst torch==%,%,$(LOCK_TORCH))' and f'torch {v} is the lock CPU build: name the build in TORCH_SPEC (torch==2.13.0+cu128)')
# the lock's wheels are Python 3.11's: PYTHON (or the Python .venv was made with) is checked before uv fails in it
LOCK_PYTHON := 3.11
NEEDS_LOCK_PYTHON = v=$$($(1) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); test "$$v" = $(LOCK_PYTHON) || { \
	echo "$(1) is Python $$v: needs Python $(LOCK_PYTHON): rm -rf $(VENV) && make install PYTHON=python$(LOCK_PYTHON)" >&2; exit 1; }
STAMP := $(VENV)/.installed
ifneq ($(strip $(TORCH_SPEC)) $(strip $(EXTRAS)),$(strip $(file < $(TORCH_SPEC_FILE))) $(strip $(file < $(EXTRAS_FILE))))
.PHONY: $(STAMP)
endif
# Byte-compiled once after install: where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) every new
# interpreter (the suite starts about a hundred: kernels, torchrun workers, `repro run`) would otherwise compile
# torch and transformers again. Errors are the libraries' own files for other Pythons, skipped as pip skips them.
BYTECODE := $(VENV)/.bytecode
PYTEST := $(PY) -m pytest

.PHONY: install demo test test-fast coverage durations lab lock clean-runs

install: $(STAMP)

$(STAMP): pyproject.toml $(LOCK)
	@$(call NEEDS_LOCK_PYTHON,$(if $(wildcard $(PY)),$(PY),$(PYTHON)))
	rm -f $(STAMP)  # (an install that stops half-way, the sync having taken repro out, leaves none: the next installs)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(UV) pip sync --quiet --python $(PY) --find-links $(TORCH_FIND_LINKS) $(LOCK)
	$(if $(TORCH_SPEC),$(UV) pip install --quiet --python $(PY) --reinstall-package torch $(TORCH_SPEC))
	@$(if $(TORCH_SPEC),$(PY) -c "$(TORCH_CHECK)")
	$(UV) pip install --quiet --python $(PY) --no-deps -e .
	$(if $(EXTRAS),$(UV) pip install --quiet --python $(PY) -e '.[$(EXTRAS)]')
	$(PY) -m ipykernel install --sys-prefix --name repro --display-name "Python (repro)" >/dev/null
	printf '%s\n' '$(strip $(TORCH_SPEC))' > $(TORCH_SPEC_FILE)
	printf '%s\n' '$(strip $(EXTRAS))' > $(EXTRAS_FILE)
	touch $(STAMP)

$(BYTECODE): $(STAMP)
	$(PY) -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true
	touch $(BYTECODE)

# ARGS go to repro run, e.g. make demo ARGS=--force (after params/demo.yaml was edited), ARGS=--check
demo: install $(BYTECODE)
	$(VENV)/bin/repro run params/demo.yaml $(ARGS)

# everything (what the README and .ci/run use), with one xdist worker more than cores: its tests wait on
# subprocesses (kernels starting, torchrun, a browser), and a waiting worker leaves its core idle (on 2 cores:
# 331 s with 3 workers, 353 s with 2; benchmarks/RESULTS.md). make test-fast computes in-process: a worker a core.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: install $(BYTECODE)
	$(PYTEST) -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# the inner loop: every test that runs no notebook, no `repro run`, no torchrun, no browser, no training
# (tests/conftest.py decides, from the fixtures and helpers a test uses)
test-fast: install $(BYTECODE)
	$(PYTEST) -n auto --dist loadscope --no-loadscope-reorder -m "not heavy"

# `make test` under coverage.py (pyproject.toml's [tool.coverage]): which lines of src/repro the whole suite runs, in
# every process; the modules with lines not run, most first, and the total. ARGS: pytest's, e.g. ARGS="-m 'not heavy'"
coverage: install $(BYTECODE)
	rm -f .coverage .coverage.*
	COVERAGE_FILE=$(CURDIR)/.coverage $(PY) -m coverage run -m pytest -n $(TEST_WORKERS) --dist loadscope \
		--no-loadscope-reorder $(ARGS)
	$(PY) -m coverage combine -q
	$(PY) -m coverage report

# each test module's total duration, for the order in which `make test` hands modules to its workers
durations: install $(BYTECODE)
	$(PYTEST) -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --store-durations

# JupyterLab at the project root (so `runs/demo` in a notebook is the folder the file browser shows), on this
# machine only; kernels get CurveZMQ-encrypted connections, as `repro run` gives them; notebooks/ is saved without
# outputs (the tracked notebooks stay clean: repro.cli.notebooks.pre_save_hook).
# LAB_ARGS: more options for jupyter lab (e.g. --no-browser --port 8890); as root (a container) --allow-root too
LAB_ARGS ?=
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: install $(BYTECODE)
	$(VENV)/bin/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir="$(CURDIR)" \
		--KernelManager.transport_encryption=auto --ContentsManager.pre_save_hook=repro.cli.notebooks.pre_save_hook \
		$(LAB_ROOT) $(LAB_ARGS)

# Re-resolve the whole environment (Linux x86-64, Python 3.11, extras dev) after changing pyproject.toml's
# dependencies; tests/test_lock.py checks that the two agree.
lock: install
	echo "$(LOCK_TORCH)" > $(VENV)/lock-constraints.txt
	$(UV) pip compile pyproject.toml --extra dev --generate-hashes --python-version $(LOCK_PYTHON) \
		--python-platform x86_64-manylinux_2_28 --find-links $(TORCH_FIND_LINKS) \
		--constraint $(VENV)/lock-constraints.txt --custom-compile-command "make lock" --quiet -o $(LOCK)

clean-runs:
	rm -rf runs/
