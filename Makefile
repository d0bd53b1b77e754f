# Entry points. Each target installs what it needs first, so on a fresh Debian 12
# machine `make demo` and `make test` are the only set-up commands.
#
# In CI (CI=true) the build is the sanitizer configuration with -Werror. It includes the
# benchmarks (bench/), built but never run there: they are the evidence behind the
# README's figures, and must keep compiling (scripts/bench runs them, in Release). Its
# debug information is line tables only (-g1): sanitizer reports keep file and line, and
# the build is about a tenth faster than with full -g. The library, `awa serve` and the CLI
# are unity builds there (AWA_UNITY; in the TSan build too): with the sanitizers they
# compile in 1:55 instead of 5:01 on 2 cores (180 s of CPU instead of 489 s).

JOBS ?= 2
ifeq ($(CI),true)
  BUILD_DIR ?= build-ci
  CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DAWA_SANITIZE=ON \
    -DAWA_WERROR=ON -DAWA_BUILD_BENCH=ON -DAWA_UNITY=ON
else
  BUILD_DIR ?= build
  CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
endif

# When DATABASE_URL is unset, use the project's own PostgreSQL (scripts/pg). A failure
# to find it stops the recipe: a missing database is a failure, never a skipped test.
WITH_DB = url="$${DATABASE_URL:-$$(scripts/pg url)}" && [ -n "$$url" ] && DATABASE_URL="$$url"

.PHONY: all deps test-deps build build-demo pg demo test docs-check test-tsan unit-test format format-check models clean

all: build

deps:
	@scripts/install-deps

# The browser test's chromium and chromedriver: only `make test` needs them.
test-deps:
	@scripts/install-deps --test

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Only what the demo runs, in a folder of its own: the library and `awa`, Release, as a
# unity build (a few large translation units parse the third-party headers once each
# instead of once per file), no tests or benchmarks: 80 s on 2 cores when nothing else runs,
# where `make build` (every test and benchmark, with debug information) takes many times that.
# scripts/quickstart-check builds the library the same way, so CI keeps it compiling.
DEMO_DIR ?= build-demo
DEMO_CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON -DAWA_BUILD_TESTS=OFF \
  -DAWA_BUILD_BENCH=OFF

$(DEMO_DIR)/CMakeCache.txt:
	cmake -S . -B $(DEMO_DIR) -G Ninja $(DEMO_CMAKE_FLAGS)

build-demo: deps $(DEMO_DIR)/CMakeCache.txt
	cmake --build $(DEMO_DIR) --target awa_tool -j $(JOBS)

pg: deps
	@if [ -z "$$DATABASE_URL" ]; then scripts/pg start; fi

# The demo workload with its summary, then the dashboard on the same schema, left running
# in the background with a worker that keeps a trickle of demo jobs moving: its URL is
# the last line printed (scripts/dashboard stop ends both).
demo: build-demo pg
	$(WITH_DB) $(DEMO_DIR)/awa demo
	@$(WITH_DB) AWA_BIN=$(DEMO_DIR)/awa scripts/dashboard start --demo

test: test-deps format-check docs-check build pg
	$(WITH_DB) ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) --timeout 600

# The runtime's threads under ThreadSanitizer: the in-process tests of the client, its
# prefetch, the completion batcher, the pool, the metrics registry, `awa serve`'s HTTP
# server and the span exporter, in a binary of their own (awa_tsan_tests: only the files that hold these
# suites). Its own build folder; the `awa` binary the runtime tests spawn is built with it.
# -O1 (what ThreadSanitizer's documentation asks for reasonable speed) and line tables: it builds
# faster than -O2 -g, and reports keep file and line.
TSAN_DIR ?= build-tsan
# Of the tracing tests, those whose spans cross the exporter's queue and thread under
# load: a full trace, a slow collector, one that is down.
TSAN_TRACING = TracingTest.ARequests*:TracingTest.ASlowCollector*:TracingTest.ACollectorThatIsDown*
TSAN_TESTS ?= RuntimeTest.*:ReadinessTest.*:PrefetchTest.*:CompletionBatcherTest.*:PoolTest.*:MetricsTest.*:NotifyTest.*:ServeTest.*:$(TSAN_TRACING)
test-tsan: deps pg
	@[ -f $(TSAN_DIR)/CMakeCache.txt ] || cmake -S . -B $(TSAN_DIR) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
	  -DAWA_TSAN=ON -DAWA_BUILD_BENCH=OFF -DAWA_UNITY=ON
	cmake --build $(TSAN_DIR) -j $(JOBS) --target awa_tsan_tests awa_tool
	$(WITH_DB) TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  $(TSAN_DIR)/awa_tsan_tests --gtest_filter='$(TSAN_TESTS)'

unit-test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -L unit

format:
	@git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

format-check: deps
	@files=$$(git ls-files '*.cpp' '*.hpp'); \
	if [ -n "$$files" ] && ! clang-format --dry-run --Werror $$files; then \
	  echo "format-check: run 'make format'"; exit 1; fi

# The docs against the tree: every path a doc or comment names exists, every option field
# has its row in docs/configuration.md, the README's example is the program CI runs.
docs-check: deps
	@scripts/check-refs
	@scripts/check-config-doc --strict
	@scripts/check-readme-example

models: deps
	scripts/models

clean:
	rm -rf build build-ci build-release build-tsan build-demo
