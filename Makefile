# lockstep: the two commands a new user needs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Debian packages providing the real Prometheus stack the tests and the demo start.
# ethtool and ip (iproute2) let the PFC test read a real veth pair's driver statistics; chromium
# renders the monthly report headless to check its plots.
DEB_TOOLS := prometheus promtool prometheus-alertmanager amtool prometheus-node-exporter ethtool ip chromium
DEB_PACKAGES := prometheus prometheus-alertmanager prometheus-node-exporter ethtool iproute2 chromium

.PHONY: test demo bench eval tools venv clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

tools:
	@missing=""; for t in $(DEB_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian packages $(DEB_PACKAGES) (missing:$$missing)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES) >/dev/null; \
	  else \
	    echo "error: missing$$missing; install the Debian packages: sudo apt-get install $(DEB_PACKAGES)" >&2; exit 1; \
	  fi; \
	fi

test: $(STAMP) tools
	$(PY) -m pytest $(PYTEST_ARGS)

demo: $(STAMP) tools
	$(VENV)/bin/lockstep demo $(DEMO_ARGS)

bench: $(STAMP) tools
	$(PY) bench/run_all.py $(BENCH_ARGS)

eval: $(STAMP)
	$(VENV)/bin/lockstep analytics evaluate --all simulator/scenarios

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
