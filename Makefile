# mtp-remote — the two commands a new user needs: `make demo` and `make test`.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test test-real real-setup lint install system-deps clean bench container-up container-down slurm-up \
        slurm-down

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

## demo: fab diagnose against the embedded simulated host (sim-local: MTP with the state_leak fault)
demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/fab diagnose; code=$$?; \
	  if [ $$code -le 1 ]; then echo "demo finished (exit $$code: 1 = a speculative profile corrupts output, as expected on sim-local)"; exit 0; fi; exit $$code

## system-deps: the system packages the tests use, installed with apt-get when missing and running as root
## (otherwise said, and the tests that need them skip). One entry per package in SYSTEM_DEPS below:
## "<command>[,<command>...]:<apt package>[+<apt package>...]" (any of the commands proves it is there); add new
## ones there.
##   sshd      OpenSSH server (tests/ssh start their own sshd on 127.0.0.1)
##   chromium  the HTML report is opened headless
##   podman, runc  the container hosts and tests (docs/containers.md; the shipped sim-container/sim-image hosts
##   name podman, so a docker client is no substitute: some machines carry one with no daemon). Then podman
##   is probed with a local image (tests/support/containers.py configure: on a cgroup-hybrid host without
##   CAP_SYS_RESOURCE it writes /etc/containers/containers.conf.d/50-mtp-remote.conf, root only).
##   slurmctld, slurmd, munged, sbatch  Debian's SLURM + munge (tests/slurm start a one-node cluster on
##   127.0.0.1; docs/slurm.md)
SYSTEM_DEPS := \
	sshd:openssh-server+openssh-client \
	chromium:chromium \
	podman:podman \
	runc:runc \
	slurmctld:slurmctld \
	slurmd:slurmd \
	munged:munge \
	sbatch:slurm-client
system-deps:
	@missing=""; \
	for dep in $(SYSTEM_DEPS); do \
	  found=""; \
	  for cmd in $$(echo "$${dep%%:*}" | tr , " "); do \
	    if command -v $$cmd >/dev/null 2>&1 || [ -x /usr/sbin/$$cmd ]; then found=1; fi; \
	  done; \
	  [ -n "$$found" ] || missing="$$missing $$(echo "$${dep#*:}" | tr + ' ')"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing:$$missing"; \
	    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing:$$missing (install them, e.g. sudo apt-get install$$missing); the tests that need them will be skipped"; \
	  fi; \
	fi; \
	if command -v podman >/dev/null 2>&1 || command -v docker >/dev/null 2>&1; then $(PY) -m tests.support.containers configure || true; fi

## test: all tests (unit, integration against the sim, ssh against a real sshd on 127.0.0.1, and real SGLang
## 0.5.9 on the CPU: one lifecycle over ssh with the loop stop's abort in it, a baseline diagnose, a NEXTN
## lifecycle on the accept-all hybrid, the injected faults and tree ops in one process each; `make test-real` has
## the rest: the trained hybrid's healthy/looping NEXTN pair, each shipped real host's diagnose). real-setup runs
## first, outside pytest: it builds the real-engine cache once per machine (nothing when its stamps are there) and
## stops `make test` with the failed step named.
## TEST_WORKERS pytest-xdist processes (default 3 on any core count: the suite waits on servers a quarter of its
## time, so a third worker fills two cores; 1 = serial) with --dist loadgroup: tests/conftest.py puts
## each file in an xdist_group of its own (its tests share its module fixtures and never run beside each other)
## and the real-engine files and those that assert a measured speed or duration in one group (one worker), handed
## out first (the longest).
## --durations=10 lists the ten slowest tests. The rig and its measured times: docs/testing.md.
## PYTHONDONTWRITEBYTECODE (set in many container images) is dropped for the run: the suite starts ~1,000 Python
## processes of this tree (sims, CLI runs, the nvidia-smi stand-in) and pytest rewrites every test file's asserts
## in each worker; without cached bytecode each of them compiles its modules again.
TEST_WORKERS ?= 3
test: $(STAMP) system-deps real-setup
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -ra --durations=10 $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)

## real-setup: real SGLang 0.5.9 for this CPU + tiny local models + the lint venv of tests/sglang_parser, cached
## once per machine outside the clone in ~/.cache/mtp-remote/ (MTP_REMOTE_REAL_CACHE=DIR moves it). A sequence of
## named steps (pip, the SGLang patches, the model build; tests/support/real_sglang.py STEPS), each stamped when
## done: a second run builds nothing, a failed one resumes at its step. Progress every 30 s; the whole output
## in <cache>/sglang-0.5.9-cpu-v2.build.log. REBUILD=1 builds it all again.
## It trains one model (the hybrid that answers: ~10-16 min of one core, once). Then `fab -H real-cpu diagnose` (dense,
## STANDALONE), `fab -H real-hybrid diagnose` and `fab -H real-hybrid-loop diagnose` (hybrid, NEXTN) run against it.
real-setup: $(STAMP)
	@$(BIN)/python -m tests.support.real_sglang $(if $(REBUILD),--rebuild)

## test-real: the real-engine tests in full: baseline vs STANDALONE (real-cpu), diagnose on every real-hybrid*
## host (NEXTN: the trained hybrid healthy and under a real state fault, the random one with two injected
## faults), both real hosts against transformers' reference, and real-cpu served from a container (the container
## kind, the CPU venv bind-mounted into a local image)
test-real: $(STAMP) system-deps real-setup
	env -u PYTHONDONTWRITEBYTECODE MTP_REMOTE_REAL_FULL=1 $(BIN)/python -m pytest -q -ra -s tests/real

## bench: the performance suite (each issue-11 figure beside its anchor, locally and through a loopback sshd);
## rewrites the generated part of docs/PERFORMANCE.md. REPEATS=N per figure (default 5: about 10 minutes on 2 cores);
## NOTE="..." adds a sentence on the conditions (e.g. a shared machine)
REPEATS ?= 5
NOTE    ?=
bench: $(STAMP) system-deps
	$(BIN)/python -m bench --repeats $(REPEATS) --write-docs --note "$(NOTE)"

## container-up: build the local image (a minimal rootfs; the host's /usr, python and this clone bind-mounted
## read-only at run time) and start the long-lived container mtp-remote-sim that `fab -H sim-container diagnose`
## execs into; `fab -H sim-image diagnose` runs each profile as its own container of that image.
## container-down: remove our containers (label mtp-remote) and the image. docs/containers.md
container-up: $(STAMP) system-deps
	$(BIN)/python -m tests.support.containers up

container-down:
	$(PY) -m tests.support.containers down

## lint: ruff over mtp_remote, bench and tests with the rule sets pinned in pyproject.toml (not part of `make test`)
lint: $(STAMP)
	$(BIN)/ruff check mtp_remote bench tests

## slurm-up: a one-node SLURM cluster on 127.0.0.1 for trying the SLURM kind by hand (as root; munged, slurmctld,
## slurmd with two fake GPUs, state in $(SLURM_DIR)); `fab -H sim-slurm diagnose` and `mtp-remote nightly -H
## slurm-nodes` use it. slurm-down stops those daemons by PID (tests/support/slurm.py).
SLURM_DIR ?= /tmp/mtp-remote-slurm
slurm-up: $(STAMP) system-deps
	$(BIN)/python -m tests.support.slurm up --dir $(SLURM_DIR)

slurm-down:
	$(PY) -m tests.support.slurm down --dir $(SLURM_DIR)

clean:
	rm -rf $(VENV) runs .pytest_cache
