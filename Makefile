# abacus-ray — every target works as the first command on a fresh clone.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# CPU machines pin the local CPU build of torch so pip never pulls a multi-GB CUDA wheel.
HAS_CUDA := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
TORCH_CPU := torch==2.13.0
# Ray with token auth and no usage reporting. Nothing here stops a node from joining a cluster: the
# embedded Ray's loopback-only settings live in abacus_ray/cluster/runtime.py and stay in that Ray.
export RAY_USAGE_STATS_ENABLED=0
export RAY_AUTH_MODE=token

DEMO    ?= results/demo
RESULTS ?= $(DEMO)/fig10_k
STORAGE ?= results
# Paper-preset figure targets run against a cluster: RAY_ADDRESS=ray://head:10001 or auto.
RAY_ADDRESS ?= auto
FIGURES := fig3_embeddings fig4_depth_recurrence fig5_add_sub fig6_multiplication fig7_relative \
           fig8_bitwise_or fig9_data_size fig10_k fig11_large_k fig15_recurrence_outputs fig16_no_mask \
           fig18_effective_depth fig19_injection_throttle fig20_random_padding fig21_index_hints \
           table1_sorting table2_sorting_arch extrapolation_10x

.PHONY: install test test-scenarios test-many-nodes test-fast test-floors demo lint bench soak suite-cpu clean eval-100plus dashboards browser-deps reproduce $(FIGURES) \
        fig3 fig4 fig5 fig6 fig7 fig8 fig9 fig10 fig11 fig15 fig16 fig18 fig19 fig20 fig21 table1 table2 x10

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

# The tiers (docs/guide.md, "Tests"). `make test` is the developer's gate (12 minutes at most on 2 cores):
# everything but the scenarios, browser tests included (browser-deps installs Playwright and Debian's
# chromium), on two pytest-xdist workers, whole modules each (module fixtures run once), the costliest
# modules first (tests/conftest.py; xdist's own reordering by test count is off), ending with its 15
# slowest tests. More workers than cores was slower: the suite is CPU-bound.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
GATED  := -m "not cluster and not scenario and not many_nodes"
test: install browser-deps
	$(PYTEST) $(GATED) --durations=15

# The scenarios, minutes each, so outside `make test`; CI runs them right after it, and they gate: the
# share-nothing cluster (Ray nodes that share only the network and an S3 server on loopback, each with
# a private /tmp), the SIGKILLed driver, Train worker and evaluators, the disk that fills, the 3-raylet
# scheduling, placement and DDP scenarios, a finished sweep grown, and the tiny preset learning in its
# own 3,000 steps.
test-scenarios: install browser-deps
	$(PYTEST) -m "cluster or scenario" --durations=15

# The scheduling scenario at 9 raylets and 24 trials (about 11 minutes). Not in CI: the same assertions
# gate at 3 raylets in `make test-scenarios` (tests/test_multinode.py, mixed trial shapes).
test-many-nodes: install
	$(BIN)/python -m pytest -q -s -m many_nodes --durations=5

# No Ray, no servers, no spawned processes, no browser, no training beyond a few steps: the inner loop
# while editing, green right after `make install`.
test-fast: install
	$(PYTEST) -m "not ray and not slow and not cluster and not scenario and not many_nodes"

# The lowest version of every package pyproject.toml allows (each `>=` pinned to `==`), installed in
# an environment of its own (.venv-floors), then the fast tier there: a user's oldest allowed set
# must pass it too. Minutes (it downloads the floors); not in CI.
FLOORS := $(VENV)-floors
test-floors:
	@test -x $(FLOORS)/bin/python || $(PY) -m venv $(FLOORS)
	@$(FLOORS)/bin/python -m pip install -q --upgrade pip
	@$(FLOORS)/bin/python -c "import re, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
	  deps = p['dependencies'] + [d for v in p['optional-dependencies'].values() for d in v]; \
	  print('\n'.join(re.sub(r'\[.*?\]', '', d).replace('>=', '==') for d in deps))" > $(FLOORS)/floors.txt
	$(FLOORS)/bin/python -m pip install -q -c $(FLOORS)/floors.txt -e ".[test,dev]"
	$(FLOORS)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	  -m "not ray and not slow and not cluster and not scenario and not many_nodes"

# The main job on an embedded local Ray (127.0.0.1): the tiny Fig. 10 sweep, trained through Tune +
# Train, evaluated through Ray Data into Parquet; then one row per k (95 % intervals, where the trained
# positions end) and its `Conclusion (Fig. 10):` verdict. DEMO_FLAGS adds sweep flags, e.g.
# DEMO_FLAGS="--set seed=1" (another training seed).
DEMO_FLAGS ?=
demo: install
	$(BIN)/python sweeps/fig10_k.py --preset tiny --storage $(DEMO) $(DEMO_FLAGS)
	@echo "dashboard: $(DEMO)/fig10_k/dashboard/index.html"
	@echo "Fig. 10 (tiny): Abacus 2 x 1 models on 1-5-digit addition, one per offset k; rates over 300 problems per cell"
	@$(BIN)/abacus-ray summary $(DEMO)/fig10_k/results --fig10

# The paper at CPU scale: every figure and table sweep at its tiny settings, one after another on an
# embedded local Ray, then one verdict per sweep (`abacus-ray reproduce`; the same command resumes).
# REPRO=dir chooses where; FLAGS adds its flags, e.g. FLAGS="--only fig3_embeddings,fig4_depth_recurrence".
REPRO ?= results/reproduce
reproduce: install
	$(BIN)/abacus-ray reproduce --storage $(REPRO) $(FLAGS)

# Every checkpoint under RESULTS on the 101-160 diagonal; only missing cells are evaluated.
eval-100plus: install
	$(BIN)/abacus-ray eval-all $(RESULTS) --grid paper-100plus

# Interactive dashboards (static HTML, offline) of RESULTS: a results dir, a sweep root or a storage root.
# DASH=dir chooses where (default: dashboard/ beside the results).
dashboards: install
	$(BIN)/abacus-ray dashboard $(RESULTS) $(if $(DASH),--out $(DASH))

# The browser test's tools: Playwright from PyPI and Debian's chromium (never a browser download).
# Without root or apt the browser tests fail and say why.
browser-deps: install
	@$(BIN)/python -c "import playwright" 2>/dev/null || $(BIN)/python -m pip install -q "playwright>=1.40"
	@command -v chromium >/dev/null 2>&1 || (apt-get install -y -qq chromium >/dev/null 2>&1 || \
		(apt-get update -qq && apt-get install -y -qq chromium >/dev/null)) || \
		echo "browser-deps: could not install chromium (needs root and apt); the browser tests will fail"
	@command -v ip >/dev/null 2>&1 || apt-get install -y -qq iproute2 >/dev/null 2>&1 || \
		echo "browser-deps: no 'ip' (iproute2): the multi-node tests' network namespace will fail"

# `make fig10_k` (or `make fig10`): the paper preset of that figure on the cluster at RAY_ADDRESS.
# FLAGS adds sweep flags (later flags win), e.g. FLAGS="--set cluster.use_gpu=true --seeds 1".
FLAGS ?=
$(FIGURES): install
	RAY_ADDRESS=$(RAY_ADDRESS) $(BIN)/python sweeps/$@.py --preset paper --storage $(STORAGE) $(FLAGS)
fig3: fig3_embeddings
fig4: fig4_depth_recurrence
fig5: fig5_add_sub
fig6: fig6_multiplication
fig7: fig7_relative
fig8: fig8_bitwise_or
fig9: fig9_data_size
fig10: fig10_k
fig11: fig11_large_k
fig15: fig15_recurrence_outputs
fig16: fig16_no_mask
fig18: fig18_effective_depth
fig19: fig19_injection_throttle
fig20: fig20_random_padding
fig21: fig21_index_hints
table1: table1_sorting
table2: table2_sorting_arch
x10: extrapolation_10x  # the search beyond the paper (docs/results.md §6)

lint: install
	$(BIN)/ruff check .  # every Python file of the repository

# Every benchmark but the long ones with targets of their own (soak, suite-cpu) and the one-trial tool
# demo_settings.py (it takes the trial to train); storage_s3.py starts a
# SeaweedFS server on loopback and takes about 6 minutes (docs/performance.md, "Object storage").
bench: install
	@for b in $(filter-out benchmarks/soak.py benchmarks/suite_cpu.py benchmarks/demo_settings.py,$(wildcard benchmarks/*.py)); do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# `make test`'s CPU by process name, every process counted (Linux process accounting; root and `acct`).
suite-cpu: install browser-deps
	@command -v accton >/dev/null 2>&1 || apt-get install -y -qq acct >/dev/null
	$(BIN)/python benchmarks/suite_cpu.py -- $(PYTEST) $(GATED)

soak: install  ## 30 minutes of tiny sweeps + evaluations; memory, files and Ray processes must stay flat
	$(BIN)/python benchmarks/soak.py --minutes $(or $(MINUTES),30) --out results/soak.csv

clean:
	rm -rf $(VENV) $(FLOORS) results .pytest_cache
