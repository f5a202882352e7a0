# The two commands: `make demo` and `make test`.  Both do all set-up on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The oracles the test suite runs: real libibverbs and its tools, umockdev, hwloc (lstopo),
# and in the kernel lab's NUMA machine numactl and Open MPI's mpirun (tests/kernel/numa_vm.py).
# python3-pyverbs: rdma-core's own Python bindings (for /usr/bin/python3), which
# tests/test_pyverbs_oracle.py runs beside sysverbs.compat.pyverbs.
# libibverbs-dev, librdmacm-dev, libnl-3-dev, libnl-route-3-dev and pkg-config: the static
# libibverbs.a and librdmacm.a (with their provider archives) that tests/oracle/static.py
# links tests/oracle/static_probe.c against (gcc -static), the oracle of static_providers.
# prometheus (with promtool) and prometheus-node-exporter: the real Prometheus that scrapes
# `sysverbs metrics` and the node_exporter that serves its textfile
# (tests/test_prometheus_oracle.py, tests/prom.py), promtool's check of every fixture's
# exposition (tests/test_metrics.py); the tests start their own, on 127.0.0.1, and stop them.
# chromium: the headless browser that renders every GPU fixture's `topo --svg` (tests/test_svg.py).
# libfabric-bin: libfabric's fi_info, beside doctor --predict (tests/test_predict_fabric.py, kernel lab).
# rdmacm-utils: rping, rdma_cm's real client beside no_rdma_gid_for_address (kernel lab, roce).
APT_PACKAGES := libibverbs1 ibverbs-providers ibverbs-utils umockdev util-linux python3-venv \
  udev gir1.2-umockdev-1.0 python3-gi qemu-system-x86 linux-image-amd64 busybox-static iproute2 \
  librdmacm1 cpio kmod gcc libc6-dev strace hwloc ucx-utils libfabric-bin numactl openmpi-bin \
  pypy3 pypy3-venv python3-pyverbs rdmacm-utils \
  libibverbs-dev librdmacm-dev libnl-3-dev libnl-route-3-dev pkg-config \
  prometheus prometheus-node-exporter pciutils \
  chromium

# The real NCCL oracle (tests/test_nccl_oracle.py): PyPI's nvidia-nccl-cu12 wheels (2.32.3,
# ~350 MB, and 2.21.5, ~190 MB, for the rules that changed: parseStringList, config files),
# downloaded once per machine into NCCL_CACHE and unpacked there; no GPU is needed.
NCCL_VERSION := 2.32.3
NCCL_OLD_VERSION := 2.21.5
NCCL_CACHE ?= $(if $(filter 0,$(shell id -u)),/var/cache/sysverbs-test/nccl,$(HOME)/.cache/sysverbs-test/nccl)
NCCL_LIB := $(NCCL_CACHE)/$(NCCL_VERSION)/nvidia/nccl/lib/libnccl.so.2
NCCL_OLD_LIB := $(NCCL_CACHE)/$(NCCL_OLD_VERSION)/nvidia/nccl/lib/libnccl.so.2
NCCL_ENV := SYSVERBS_NCCL_LIB=$(NCCL_LIB) SYSVERBS_NCCL_OLD_LIB=$(NCCL_OLD_LIB)
# Python caches the bytecode it compiles, as it does by default, even where the environment
# says not to (PYTHONDONTWRITEBYTECODE=1, common in container images): the suite starts
# thousands of interpreters, CPython and pypy3, each of which would compile every module it
# imports again (about 40 ms of a 90 ms `sysverbs env` here), and pytest would rewrite
# every test module in every worker.  The caches go to the clone's __pycache__ folders,
# which git ignores.
unexport PYTHONDONTWRITEBYTECODE
# Python 3.9 (the declared floor) and a second implementation: Debian's pypy3.
PYPY ?= pypy3
VENV_PYPY := .venv-pypy
UV := $(VENV)/bin/uv
# What runs under pypy3: every test that runs sysverbs in its own process (and the tests
# of its command line, its testing kit, its data), that is every test but
# - the kernel VM (tests/kernel);
# - the comparisons with real counterparts (tests/test_*oracle*.py, the tests marked
#   `oracle` elsewhere, the hwloc ones: tests/test_placement_hwloc.py,
#   tests/test_cpu_caches.py, tests/test_run_hwloc.py; promtool, Prometheus and
#   node_exporter beside sysverbs metrics: tests/test_metrics.py,
#   tests/test_prometheus_oracle.py) and the differential fuzzing
#   (tests/test_fuzz_*.py): the real tool and sysverbs side by side in child processes
#   (a new interpreter per case, which under pypy3 costs more than the case), running
#   the code that the other tests run in-process;
# - the command line run end to end, command by command: on every fixture (`sysverbs
#   netdev`, the contract's table of every command in tests/test_cli_contract.py), on
#   broken trees (tests/test_bad_input_cli.py; tests/test_bad_input.py, the same inputs
#   in-process, does run here), for every example of the docs and along a newcomer's
#   path (tests/test_cli_newcomer.py), the fixture benchmark's and the pytest plugin's
#   own runs: a pypy3 start per command (about 1,000 of them, several minutes of the 2
#   cores), the same commands' code as the command-line tests that do run here (every
#   command's --help, devices, devinfo, doctor, watch, snapshot, run, in a pypy3 child);
# - every value of every fixture parsed (tests/test_attributes.py's widest test, 30 s
#   under pypy3; the parsers' other tests run here);
# - the benchmark (benchmarks/ and tools/ may need 3.10+);
# - tests/test_layout.py: checks of the source's layout (its syntax trees) and of the
#   modules `import sysverbs` loads under CPython, whose answers do not depend on the
#   interpreter running them;
# - tests/test_self_contained.py (it runs data tests from a copy of the checkout: the
#   same tests that this run runs directly);
# - the umockdev testbed test of the monitor (its child drives the testbed through
#   PyGObject, python3-gi, which Debian builds for CPython only).
# - the fleet's and static_providers' command-line files (test_metrics, test_nfd,
#   test_fleet_docs, test_static_providers): mostly a pypy3 child per command, the same
#   code the CPython run checks; with them the pypy3 run took 380 s beside CPython's 536.
#   So are test_cli_robust and test_fleet_robust (a child per command line or signal),
#   and the commands compared with each other or with real tools on every fixture, rank
#   and corrupted tree (test_consistency, test_findings_oneanswer, test_verdicts), run on
#   snapshots (test_snapshot_roundtrip), as uid 65534 on read-only mounts or in a memory
#   cgroup under attack (test_deploy_mounts, test_exporter_load), beside node_exporter
#   and hwloc (test_node_exporter_counters, test_grace_hosts), at two host sizes
#   (test_scale_reads), on hostile recordings (test_hostile_recording) and with `run`
#   exec'ing real commands (test_run_exclusive): with them the pypy3 run took 840 s,
#   beside CPython's 783 (CI's fresh-clone make test: 883 s); their code's own unit
#   tests run here (test_hostroot, test_pcie_links, test_exporter_serve, ...).
# - the fixture cache under concurrent first calls (file locks and renames: the kernel's
#   answers) and the udev source beside pyudev and systemd's hwdb on every fixture (real
#   tools' answers): 18 of the pypy3 run's 183 CPU-seconds; the other tests of both files
#   run here.
# - deploy/'s objects against the Kubernetes schemas (tests/test_deploy_schema.py): data,
#   not code; kubernetes-validate is in the dev extra, which only the CPython run installs.
# Left out by selection, not by skipping: under CI=true a skip is a failure.
# --assert=plain: Debian 12's PyPy 7.3.11 has an incremental-GC bug (fixed in 7.3.16)
# that now and then crashes it with a segfault while pytest rewrites the test modules'
# assertions (pytest-dev/pytest#11168, pypy/pypy#3959); it did so once here.  The
# CPython run beside it reports the same assertions in full.
PYPY_TESTS := --assert=plain --ignore=tests/kernel --ignore=tests/test_bench.py --ignore=tests/test_layout.py \
  --ignore=tests/test_self_contained.py \
  --ignore=tests/test_fuzz_differential.py --ignore=tests/test_fuzz_unprivileged.py \
  --ignore=tests/test_oracle_cli.py --ignore=tests/test_oracle_core.py \
  --ignore=tests/test_oracle_fixtures.py --ignore=tests/test_oracle_fork.py \
  --ignore=tests/test_diagnose_oracle.py --ignore=tests/test_rdmacm_oracle.py \
  --ignore=tests/test_nccl_oracle.py --ignore=tests/test_placement_hwloc.py \
  --ignore=tests/test_cpu_caches.py --ignore=tests/test_run_hwloc.py \
  --ignore=tests/test_pyverbs_oracle.py \
  --ignore=tests/test_svg.py \
  --ignore=tests/test_static_probe_build.py --ignore=tests/test_static_oracle.py \
  --ignore=tests/test_metrics.py --ignore=tests/test_nfd.py --ignore=tests/test_fleet_docs.py \
  --ignore=tests/test_static_providers.py --ignore=tests/test_deploy_schema.py \
  --ignore=tests/test_cli_robust.py --ignore=tests/test_fleet_robust.py \
  --ignore=tests/test_consistency.py --ignore=tests/test_findings_oneanswer.py \
  --ignore=tests/test_verdicts.py --ignore=tests/test_snapshot_roundtrip.py \
  --ignore=tests/test_exporter_load.py --ignore=tests/test_deploy_mounts.py \
  --ignore=tests/test_node_exporter_counters.py --ignore=tests/test_grace_hosts.py \
  --ignore=tests/test_scale_reads.py --ignore=tests/test_hostile_recording.py \
  --ignore=tests/test_run_exclusive.py \
  --ignore=tests/test_read_once.py \
  --deselect tests/test_fixture_cache.py::test_concurrent_first_calls \
  --deselect tests/test_udev_source.py::test_pyudev_sees_the_fixture_devices \
  --deselect tests/test_udev_source.py::test_vendor_model_from_hwdb_matches_systemd_hwdb \
  --deselect tests/test_fixture_cache.py::test_bench_fixture_runs \
  --ignore=tests/test_acs.py --ignore=tests/test_access.py \
  --ignore=tests/test_prometheus_oracle.py \
  --ignore=tests/test_fleet_sim.py \
  --deselect tests/test_monitor.py::test_udev_events_under_umockdev -m 'not oracle' \
  --deselect tests/test_cli.py::test_netdev_on_every_fixture \
  --deselect tests/test_cli.py::test_docs_shell_examples \
  --ignore=tests/test_cli_contract.py --ignore=tests/test_bad_input_cli.py \
  --deselect tests/test_testing_kit.py::test_plugin_entry_point \
  --deselect tests/test_attributes.py::test_every_fixture_value_parses \
  --ignore=tests/test_cli_newcomer.py

.PHONY: demo test fuzz bench lint typecheck pytest pytest-cpython pytest-pypy oracle-deps \
  nccl-oracle device-check clean

# The virtualenvs are filled by uv (PyPI's `uv`, installed into the CPython virtualenv
# first): the same packages as pip would install, in a few seconds where pip took about
# 20 s for CPython and 40 s for pypy3 (whose pip runs before its JIT warms up).  Where
# uv cannot be installed, pip does it all.
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || { \
	  echo "python3 -m venv failed; installing python3-venv" >&2; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv && \
	  $(PYTHON) -m venv $(VENV); }
	@if $(PY) -m pip install -q uv && { echo "uv pip install -e '.[dev]'"; \
	    $(UV) pip install -q --python $(PY) -e '.[dev]'; }; then :; \
	else \
	  echo "uv unavailable or failed (it reads no pip.conf): installing with pip" >&2; \
	  $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[dev]'; fi
	@touch $@

$(VENV_PYPY)/.installed: pyproject.toml $(VENV)/.installed | oracle-deps
	@if [ -x $(UV) ] && { test -x $(VENV_PYPY)/bin/python || \
	    $(PYPY) -m venv --without-pip $(VENV_PYPY); } && \
	    { echo "uv pip install --python $(VENV_PYPY)/bin/python -e '.[test]'"; \
	      $(UV) pip install -q --python $(VENV_PYPY)/bin/python -e '.[test]'; }; then :; \
	else \
	  echo "installing the pypy3 virtualenv with pip" >&2; \
	  test -x $(VENV_PYPY)/bin/pip || $(PYPY) -m venv --clear $(VENV_PYPY); \
	  $(VENV_PYPY)/bin/python -m pip install -q -e '.[test]'; fi
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
	@echo
	@echo '$$ sysverbs topo --assign --fixture gpu-hgx-h100 --rank 0   # which NIC GPU0 should use'
	@$(VENV)/bin/sysverbs topo --assign --fixture gpu-hgx-h100 --rank 0
	@echo '(sysverbs fixtures lists the other bundled hosts)'

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check sysverbs tests tools benchmarks

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy --strict sysverbs

pytest-cpython: $(VENV)/.installed oracle-deps nccl-oracle
	$(NCCL_ENV) $(VENV)/bin/pytest -ra -p no:cacheprovider -n auto --dist loadfile

pytest-pypy: $(VENV_PYPY)/.installed oracle-deps
	$(VENV_PYPY)/bin/pytest -q -ra -p no:cacheprovider $(PYPY_TESTS)

# Both at once, beside the VM (CPython's two xdist workers, the pypy3 run and qemu share
# the cores); the pypy3 run's report follows the CPython one.
# The kernel lab's boot (minutes under TCG) runs beside both runs; the kernel tests wait
# for its results (SV_LAB_SHARED, tests/kernel/conftest.py).  `make test` starts it
# before everything else and hands its directory over (LAB=DIR); `make pytest` alone
# starts it itself.  A second `tests.kernel.lab --shared` on one directory only waits
# for the first one's outcome.
pytest: $(VENV)/.installed $(VENV_PYPY)/.installed oracle-deps nccl-oracle
	@log=$$(mktemp); lab=$(if $(LAB),$(LAB),$$(mktemp -d /tmp/sysverbs-lab.XXXXXX)); start=$$(date +%s); \
	$(PY) -m tests.kernel.lab --shared $$lab >>$$lab/boot.log 2>&1 & vm=$$!; \
	trap 'kill $$vm $$pypy 2>/dev/null' INT TERM; \
	$(VENV_PYPY)/bin/pytest -q -ra -p no:cacheprovider --durations=10 $(PYPY_TESTS) >$$log 2>&1 & pypy=$$!; \
	SV_LAB_SHARED=$$lab $(NCCL_ENV) $(VENV)/bin/pytest -ra -p no:cacheprovider -n auto --dist loadfile --durations=15; cpython=$$?; \
	wait $$vm; wait $$pypy; pypy_status=$$?; \
	if [ $$cpython = 0 ]; then rm -rf $$lab; else echo "kernel lab logs: $$lab"; fi; \
	echo "======== the same suite under Python 3.9 ($$($(VENV_PYPY)/bin/python -c 'import platform; print(platform.python_implementation(), platform.python_version())')) ========"; \
	cat $$log; rm -f $$log; \
	echo "make pytest: CPython $$cpython, pypy3 $$pypy_status (0: passed), $$(( $$(date +%s) - start )) s in all"; \
	test $$cpython = 0 && test $$pypy_status = 0

# The kernel lab boots first (it needs the Debian packages and the CPython virtualenv,
# whose pyudev the VM's probes import), beside the set-up of the pypy3 virtualenv, the
# lint, the type check and then both runs.
test: $(VENV)/.installed oracle-deps
	@lab=$$(mktemp -d /tmp/sysverbs-lab.XXXXXX); start=$$(date +%s); \
	setsid $(PY) -m tests.kernel.lab --shared $$lab >$$lab/boot.log 2>&1 & vm=$$!; \
	trap 'kill -- -$$vm 2>/dev/null' INT TERM; \
	$(MAKE) --no-print-directory -j3 -O lint typecheck $(VENV_PYPY)/.installed nccl-oracle && \
	$(MAKE) --no-print-directory pytest LAB=$$lab; status=$$?; \
	if [ $$status != 0 ]; then kill -- -$$vm 2>/dev/null; fi; wait $$vm; \
	echo "make test: $$(( $$(date +%s) - start )) s"; exit $$status

# Every property test at its deep count (SYSVERBS_FUZZ_PROFILE=deep, tests/fuzz/profiles.py):
# every test file with a Hypothesis @given, whose counts come from fuzz_settings()
# (tests/test_docs.py checks it), the differential fuzzing against the real libibverbs
# (5,000 + 1,500 unprivileged examples) among them; root, like the oracle tests.
# docs/reliability.md lists the counts.  A test may take longer than make test's
# 300 s here.  The seed is printed at the start and the end: repeat a run with
# SYSVERBS_FUZZ_SEED=<seed> make fuzz.
fuzz: $(VENV)/.installed oracle-deps nccl-oracle
	SYSVERBS_FUZZ_PROFILE=deep $(NCCL_ENV) $(VENV)/bin/pytest -ra -p no:cacheprovider -s \
	  --timeout 3600 $$(grep -rlE --include='test_*.py' '^ *@given\(' tests | sort)

# sysverbs against the real libibverbs on generated hosts of 1, 64, 1024 and 4096 devices
# (root; a few minutes on 2 CPUs): prints a table and the issue-8 targets, writes
# benchmarks/results.json; then placement (issue 16: model + assign, VF scaling, topo
# beside lstopo), benchmarks/placement-results.json; then --fixture on the fixture cache
# against the unpacked tree (issue 26: within 1.5x), benchmarks/fixture-results.json;
# then one scrape of sysverbs metrics in-process (collect + render, target < 50 ms) and
# the series per node, benchmarks/metrics-results.json.
# Options: BENCH_ARGS="--samples 9".
bench: $(VENV)/.installed oracle-deps
	$(PY) benchmarks/bench_list.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_placement.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_fixture.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_run.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_metrics.py $(BENCH_ARGS)
	$(PY) benchmarks/bench_scale.py $(BENCH_ARGS)

# NCCL_IB_HCA's InfiniBand side against the real NCCL (tests/device/device_nccl_ib.py):
# only on a machine with an NVIDIA GPU, where NCCL builds a communicator and starts its IB
# transport; run with the interpreter that has libnccl (PyTorch's, or SYSVERBS_NCCL_LIB).
# Not part of make test: no GPU there, and without one NCCL never reaches that code.
device-check:
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -p no:cacheprovider -v \
	  tests/device/device_nccl_ib.py

# Mutation testing (issue 41), not part of make test: cosmic-ray's mutants of each module
# that gives verdicts, each tried against the test files that should catch it (the table
# tools/mutation_targets.json), MUTATION_JOBS at a time in copies of the checkout (a
# mutant is a file there, so the sysverbs processes the tests start import it too);
# resumable: the sessions stay in build/mutation/ while a module and its tests are
# unchanged.  One module: make mutation MODULE=sysverbs/fleet/facts.py; the scores
# alone: MUTATION_ARGS=--report.  cosmic-ray gets a virtualenv of its own, so make test
# never sees it.  docs/development.md says how to read the result.
MUTATION_VENV := build/mutation/venv
COSMIC_RAY := cosmic-ray==8.7.0
MUTATION_JOBS ?= 2
.PHONY: mutation
mutation: $(VENV)/.installed
	@test -x $(MUTATION_VENV)/bin/cosmic-ray || { $(PYTHON) -m venv $(MUTATION_VENV) && \
	  { $(UV) pip install -q --python $(MUTATION_VENV)/bin/python $(COSMIC_RAY) || \
	    $(MUTATION_VENV)/bin/pip install -q $(COSMIC_RAY); }; }
	$(MUTATION_VENV)/bin/python tools/mutation.py --python $(PY) -j $(MUTATION_JOBS) \
	  $(addprefix --module ,$(MODULE)) $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) $(VENV_PYPY) build *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
