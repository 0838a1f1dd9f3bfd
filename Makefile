# mtp-remote — the two commands a new user needs: `make demo` and `make test`.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test lint install sshd clean

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

## sshd: make sure an OpenSSH server binary exists (the ssh tests start their own on 127.0.0.1)
sshd:
	@if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing openssh-server (needed by tests/ssh)"; \
	    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server openssh-client >/dev/null; \
	  else \
	    echo "sshd is missing: install openssh-server (e.g. sudo apt-get install openssh-server); tests/ssh will be skipped"; \
	  fi; \
	fi

## test: all tests (unit, integration against the sim, ssh against a real sshd on 127.0.0.1)
test: $(STAMP) sshd
	$(BIN)/python -m pytest -q -ra

lint: $(STAMP)
	$(BIN)/ruff check mtp_remote tests

clean:
	rm -rf $(VENV) runs .pytest_cache
