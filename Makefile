# The two commands: `make demo` and `make test`.  Both do all set-up on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The oracles the test suite runs: real libibverbs and its tools, umockdev.
APT_PACKAGES := libibverbs1 ibverbs-providers ibverbs-utils umockdev util-linux python3-venv \
  udev gir1.2-umockdev-1.0 python3-gi qemu-system-x86 linux-image-amd64 busybox-static iproute2 \
  librdmacm1 cpio kmod gcc libc6-dev strace

.PHONY: demo test fuzz bench lint typecheck pytest oracle-deps clean

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

pytest: $(VENV)/.installed oracle-deps
	$(VENV)/bin/pytest -ra -p no:cacheprovider -n auto --dist loadfile

test: lint typecheck pytest

# Differential fuzzing against the real libibverbs, deep profile (root, like the oracle tests):
# 5,000 + 1,500 unprivileged examples and the concurrency test, and the deep counts of the
# matching and C-parsing properties (5,000-10,000 each), ~8 min on 2 CPUs.
# Repeat a run with SYSVERBS_FUZZ_SEED=<the printed seed>.
fuzz: $(VENV)/.installed oracle-deps
	SYSVERBS_FUZZ_PROFILE=deep $(VENV)/bin/pytest -ra -p no:cacheprovider -s \
	  tests/test_fuzz_differential.py tests/test_fuzz_unprivileged.py tests/test_concurrency.py \
	  tests/test_matching.py tests/test_cparse.py

# sysverbs against the real libibverbs on generated hosts of 1, 64, 1024 and 4096 devices
# (root; a few minutes on 2 CPUs): prints a table and the issue-8 targets, writes
# benchmarks/results.json.  Pass options with BENCH_ARGS="--samples 9".
bench: $(VENV)/.installed oracle-deps
	$(PY) benchmarks/bench_list.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
