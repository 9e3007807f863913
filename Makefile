# Warden's two commands: `make run` and `make test`. Both install what is
# missing (Debian 12 packages only), then build into build/.

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Everything Warden needs to build, test and run, from Debian 12.
DEB_PACKAGES := build-essential cmake pkg-config \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libabsl-dev libseccomp-dev libspdlog-dev libgtest-dev libgmock-dev \
  libcurl4-openssl-dev nlohmann-json3-dev \
  python3 python3-numpy python3-pandas python3-matplotlib \
  python3-grpcio python3-protobuf nodejs iproute2

.PHONY: all deps build test test-unit test-sandbox run clean

all: build

# Installs only the packages that are missing; apt-get update runs only then.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing missing packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j 2 --timeout 600

test-unit: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L unit

# Everything that needs namespaces, seccomp and cgroups.
test-sandbox: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L 'sandbox|escape|kernel'

# Until the daemon lands, `make run` demonstrates the sandbox via warden-run.
run: build
	@scripts/demo.sh $(BUILD_DIR)/bin

clean:
	rm -rf $(BUILD_DIR)
