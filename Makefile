# The two commands: `make demo` and `make test`.  Both do all set-up on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The oracles the test suite runs: real libibverbs and its tools, umockdev, hwloc (lstopo).
APT_PACKAGES := libibverbs1 ibverbs-providers ibverbs-utils umockdev util-linux python3-venv \
  udev gir1.2-umockdev-1.0 python3-gi qemu-system-x86 linux-image-amd64 busybox-static iproute2 \
  librdmacm1 cpio kmod gcc libc6-dev strace hwloc ucx-utils

.PHONY: demo test fuzz bench lint typecheck pytest oracle-deps nccl-oracle clean

# The real NCCL oracle (tests/test_nccl_oracle.py): PyPI's nvidia-nccl-cu12 wheels (2.32.3,
# ~350 MB, and 2.21.5, ~190 MB, for the rules that changed: parseStringList, config files),
# downloaded once per machine into NCCL_CACHE and unpacked there; no GPU is needed.
NCCL_VERSION := 2.32.3
NCCL_OLD_VERSION := 2.21.5
NCCL_CACHE ?= $(if $(filter 0,$(shell id -u)),/var/cache/sysverbs-test/nccl,$(HOME)/.cache/sysverbs-test/nccl)
NCCL_LIB := $(NCCL_CACHE)/$(NCCL_VERSION)/nvidia/nccl/lib/libnccl.so.2
NCCL_OLD_LIB := $(NCCL_CACHE)/$(NCCL_OLD_VERSION)/nvidia/nccl/lib/libnccl.so.2
NCCL_ENV := SYSVERBS_NCCL_LIB=$(NCCL_LIB) SYSVERBS_NCCL_OLD_LIB=$(NCCL_OLD_LIB)

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { \
	  echo "python3 -m venv failed; installing python3-venv" >&2; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv && \
	  $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

# Installs the Debian packages the oracle tests need (only those missing; needs root).
oracle-deps:
	@if ! command -v dpkg-query >/dev/null; then echo "not a Debian system: install libibverbs, ibverbs-utils and umockdev yourself" >&2; exit 0; fi; \
	missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "run as root to install: $$missing" >&2; exit 1; fi; \
	  echo "installing:" $$missing; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

nccl-oracle: $(NCCL_LIB) $(NCCL_OLD_LIB)

$(NCCL_CACHE)/%/nvidia/nccl/lib/libnccl.so.2: | $(VENV)/.installed
	mkdir -p $(NCCL_CACHE)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --dest $(NCCL_CACHE) \
	  nvidia-nccl-cu12==$*
	$(PY) -m zipfile -e $(NCCL_CACHE)/nvidia_nccl_cu12-$*-*.whl $(NCCL_CACHE)/$*
	@test -f $@

demo: $(VENV)/.installed
	@echo '$$ sysverbs devices --fixture dgx-demo        # like ibv_devices, on the bundled DGX-like host'
	@$(VENV)/bin/sysverbs devices --fixture dgx-demo
	@echo
	@echo '$$ sysverbs devinfo -l --fixture dgx-demo     # like ibv_devinfo -l'
	@$(VENV)/bin/sysverbs devinfo -l --fixture dgx-demo
	@echo '$$ sysverbs devices                           # this machine'
	@$(VENV)/bin/sysverbs devices || true

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check sysverbs tests tools benchmarks

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy --strict sysverbs

pytest: $(VENV)/.installed oracle-deps nccl-oracle
	$(NCCL_ENV) $(VENV)/bin/pytest -ra -p no:cacheprovider -n auto --dist loadfile

test: lint typecheck pytest

# Differential fuzzing against the real libibverbs, deep profile (root, like the oracle tests):
# 5,000 + 1,500 unprivileged examples and the concurrency test, ~5 min on 2 CPUs.
# Repeat a run with SYSVERBS_FUZZ_SEED=<the printed seed>.
fuzz: $(VENV)/.installed oracle-deps nccl-oracle
	SYSVERBS_FUZZ_PROFILE=deep $(NCCL_ENV) $(VENV)/bin/pytest -ra -p no:cacheprovider -s \
	  tests/test_fuzz_differential.py tests/test_fuzz_unprivileged.py tests/test_concurrency.py \
	  tests/test_nccl_oracle.py

# sysverbs against the real libibverbs on generated hosts of 1, 64, 1024 and 4096 devices
# (root; a few minutes on 2 CPUs): prints a table and the issue-8 targets, writes
# benchmarks/results.json; then placement (issue 16: model + assign, VF scaling, topo
# beside lstopo), benchmarks/placement-results.json.  Options: BENCH_ARGS="--samples 9".
bench: $(VENV)/.installed oracle-deps
	$(PY) benchmarks/bench_list.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_placement.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
