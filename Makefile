# lockstep: the two commands a new user needs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Debian packages providing the real Prometheus stack the demo and the tests start. The tests also
# need ethtool and ip (iproute2: the PFC test reads a real veth pair's driver statistics), node_exporter
# (the fabric differential test), chromium (renders the monthly report headless to check its plots),
# VictoriaMetrics (the second backend Prometheus remote_writes into; vmctl migrates history), fio
# (the one validation tool that runs without a GPU or HCA: `lockstep validate run fio` runs it for real),
# setpriv (util-linux: drops CAP_DAC_OVERRIDE to make a sysfs file unreadable), systemd-analyze
# (systemd: verifies the units in deploy/systemd/) and kubectl (Debian 12's kubernetes-client: builds
# deploy/kubernetes offline with `kubectl kustomize`; any kubectl from 1.14 on does).
# Each tool as COMMAND:PACKAGE; only the packages of missing commands are installed (a kubectl from
# elsewhere stays, for one).
DEMO_TOOLS := prometheus:prometheus promtool:prometheus prometheus-alertmanager:prometheus-alertmanager \
  amtool:prometheus-alertmanager
TEST_TOOLS := $(DEMO_TOOLS) prometheus-node-exporter:prometheus-node-exporter ethtool:ethtool ip:iproute2 \
  chromium:chromium victoria-metrics:victoria-metrics vmctl:victoria-metrics fio:fio setpriv:util-linux \
  systemd-analyze:systemd kubectl:kubernetes-client ibnetdiscover:infiniband-diags
# Debian's python3 lacks the venv module until python3-venv is installed.
VENV_PACKAGES := python3-venv

.PHONY: test test-fast lint demo bench eval fuzz tools demo-tools venv clean proto

# $(call apt_or_explain,PACKAGES,WHAT IS MISSING): install as root, else name the exact command.
define apt_or_explain
if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
  echo "installing Debian packages $(1) (missing: $(2))"; \
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(1) >/dev/null; \
else \
  echo "error: missing $(2); install the Debian packages: sudo apt-get install $(1)" >&2; exit 1; \
fi
endef

# $(call ensure_tools,COMMAND:PACKAGE ...); ip lives in /usr/sbin, off a normal user's PATH.
define ensure_tools
@missing=""; packages=""; for tool in $(1); do t=$${tool%%:*}; p=$${tool#*:}; \
  PATH="$$PATH:/usr/sbin:/sbin" command -v $$t >/dev/null && continue; missing="$$missing $$t"; \
  case " $$packages " in *" $$p "*) ;; *) packages="$$packages $$p";; esac; done; \
if [ -n "$$missing" ]; then $(call apt_or_explain,$${packages# },$${missing# }); fi
endef

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) 2>/dev/null || { rm -rf $(VENV); \
	  $(call apt_or_explain,$(VENV_PACKAGES),the venv module of $(PYTHON)); $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

tools:
	$(call ensure_tools,$(TEST_TOOLS))

demo-tools:
	$(call ensure_tools,$(DEMO_TOOLS))

# The suite spends much of its time waiting on live runs in wall-clock time (simulated clusters, Prometheus
# scrapes, Alertmanager's group waits), so three pytest-xdist workers overlap those waits with the modules
# that only compute, even on two cores (measured on two cores: 2 workers 14 min 53 s, 3 workers 11 min
# 14 s, 4 workers 8 min 39 s, the CPU busy 1.3, 1.5 and 1.7 of the 2 cores on average; since the fabric
# tests' simulated tools answer from one process, 3 workers 9 min 6 s for a clean clone). Four are faster
# but, when the machine is slow, leave tests that wait on real timeouts too little CPU: a clean-clone run
# failed three of them in an hour when the same work took 40 % more CPU (three workers passed a clean clone in
# 15 min 25 s in an hour when it took 60 % more). A module's tests
# stay on one worker (loadscope), so a module fixture (a live cluster, a filled Prometheus) starts once.
# The modules marked long (half a minute or more: a live run, a whole-scenario evaluation) start first, the
# longest first, in the order tests/conftest.py gives them (--no-loadscope-reorder: not xdist's own, most tests
# first, which started the four-minute demo last); the twenty slowest tests are printed at the end.
# TEST_WORKERS=0 runs the suite in this process (for -s, --pdb, or one test).
# The tests start hundreds of Python processes (lockstep commands, the simulator): with bytecode caches
# written (__pycache__, ignored by git) each starts on compiled modules, and pytest keeps its rewritten
# test modules, instead of compiling them again in every process. An environment that turns the caches
# off (PYTHONDONTWRITEBYTECODE=1) has them back for the tests.
test test-fast: export PYTHONDONTWRITEBYTECODE =
TEST_WORKERS ?= 3
test: $(STAMP) tools
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=20 $(PYTEST_ARGS)

# The tests that start no process (every test that does is marked integration, and tests/conftest.py
# fails one that starts a process without the marker) and cost no more than a second or two each (the
# whole-scenario evaluations and the real timeouts are marked slow; make test runs them): the check to
# run while editing, with no Debian tools needed. A module to each worker (its fixtures computed once); four
# workers, though it mostly computes, since some tests wait out short timeouts (on two cores, alternating runs:
# 2 workers 95 and 98 s, 3 workers 81 to 98 s, 4 workers 76 to 88 s, on a machine slower than usual that hour;
# on a quiet one, 2 workers 74 s, 3 workers 50 s, 4 workers 45 s).
FAST_WORKERS ?= 4
test-fast: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -m "not integration and not slow" -n $(FAST_WORKERS) --dist loadscope $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

demo: $(STAMP) demo-tools
	$(VENV)/bin/lockstep demo $(DEMO_ARGS)

bench: $(STAMP) tools
	$(PY) bench/run_all.py $(BENCH_ARGS)

# Coverage-guided fuzzing of the text parsers (atheris), FUZZ_SECONDS per target; crashes are kept
# under tests/fuzz_regressions/ and replayed by make test. Not part of make test.
FUZZ_SECONDS ?= 60
fuzz: $(STAMP)
	@$(PY) -c 'import atheris' 2>/dev/null || $(PY) -m pip install --quiet -e '.[fuzz]' || \
	  { echo "error: atheris could not be installed: it has wheels for CPython 3.8-3.11 on x86-64 Linux only;" \
	    "elsewhere it builds from source with clang and libFuzzer (Debian: clang libclang-rt-dev)" >&2; exit 1; }
	$(PY) fuzz/run.py --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

eval: $(STAMP)
	$(VENV)/bin/lockstep analytics evaluate --all simulator/scenarios --models
	$(VENV)/bin/lockstep analytics evaluate-fleet simulator/scenarios/fleet/*.yaml --models

# The kubelet PodResources and the gNMI gRPC code in exporters/third_party/ are checked in; this regenerates
# it with the one grpcio-tools release the generator pins, in a venv of its own (tools/gen_podresources.py).
PROTO_VENV := .venv-proto
GRPCIO_TOOLS := $(shell sed -n 's/^GRPCIO_TOOLS = "\(.*\)"/\1/p' tools/gen_podresources.py)
proto:
	@test -x $(PROTO_VENV)/bin/python || $(PYTHON) -m venv $(PROTO_VENV)
	$(PROTO_VENV)/bin/python -m pip install --quiet grpcio-tools==$(GRPCIO_TOOLS)
	$(PROTO_VENV)/bin/python tools/gen_podresources.py
	$(PROTO_VENV)/bin/python tools/gen_gnmi.py

clean:
	rm -rf $(VENV) $(PROTO_VENV) build *.egg-info .pytest_cache
