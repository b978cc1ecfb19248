# abacus-ray — every target works as the first command on a fresh clone.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# CPU machines pin the local CPU build of torch so pip never pulls a multi-GB CUDA wheel.
HAS_CUDA := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
TORCH_CPU := torch==2.13.0
# Ray binds loopback only and stays quiet (see docs/ray.md).
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
export RAY_USAGE_STATS_ENABLED=0
export RAY_AUTH_MODE=disabled

RESULTS ?= results/demo

.PHONY: install test demo lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip
ifeq ($(HAS_CUDA),1)
	@$(BIN)/python -m pip install -q -e ".[test,dev]"
else
	@echo "$(TORCH_CPU)" > $(VENV)/constraints.txt
	@$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt "$(TORCH_CPU)"
	@$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt -e ".[test,dev]"
endif
	@touch $(STAMP)
	@echo "installed into $(VENV)"

test: install
	$(BIN)/python -m pytest -q

demo: install
	$(BIN)/abacus-ray demo --out $(RESULTS)

lint: install
	$(BIN)/ruff check abacus_ray tests benchmarks sweeps dashboards

bench: install
	$(BIN)/python benchmarks/data_stream.py

clean:
	rm -rf $(VENV) results .pytest_cache
