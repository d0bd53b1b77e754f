# Entry points. Each target installs what it needs first, so on a fresh Debian 12
# machine `make demo` and `make test` are the only set-up commands.
#
# In CI (CI=true) the build is the sanitizer configuration with -Werror. It includes the
# benchmarks (bench/), built but never run there: they are the evidence behind the
# README's figures, and must keep compiling (scripts/bench runs them, in Release). Its
# debug information is line tables only (-g1): sanitizer reports keep file and line, and
# the build is about a tenth faster than with full -g.

JOBS ?= 2
ifeq ($(CI),true)
  BUILD_DIR ?= build-ci
  CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DAWA_SANITIZE=ON \
    -DAWA_WERROR=ON -DAWA_BUILD_BENCH=ON
else
  BUILD_DIR ?= build
  CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
endif

# When DATABASE_URL is unset, use the project's own PostgreSQL (scripts/pg). A failure
# to find it stops the recipe: a missing database is a failure, never a skipped test.
WITH_DB = url="$${DATABASE_URL:-$$(scripts/pg url)}" && [ -n "$$url" ] && DATABASE_URL="$$url"

.PHONY: all deps test-deps build pg demo test test-tsan unit-test format format-check models clean

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

pg: deps
	@if [ -z "$$DATABASE_URL" ]; then scripts/pg start; fi

# The demo workload, then the dashboard on the same schema, left running in the
# background: its URL is the last line printed (scripts/dashboard stop ends it).
demo: build pg
	$(WITH_DB) $(BUILD_DIR)/awa demo
	@$(WITH_DB) AWA_BIN=$(BUILD_DIR)/awa scripts/dashboard start

test: test-deps format-check build pg
	$(WITH_DB) ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) --timeout 600

# The runtime's threads under ThreadSanitizer: the in-process tests of the client, its
# prefetch, the completion batcher, the pool, the metrics registry and `awa serve`'s HTTP
# server, in a binary of their own (awa_tsan_tests: only the files that hold these
# suites). Its own build folder; the `awa` binary the runtime tests spawn is built with it.
# -O1 (what ThreadSanitizer's documentation asks for reasonable speed) and line tables: it builds
# faster than -O2 -g, and reports keep file and line.
TSAN_DIR ?= build-tsan
TSAN_TESTS ?= RuntimeTest.*:PrefetchTest.*:CompletionBatcherTest.*:PoolTest.*:MetricsTest.*:NotifyTest.*:ServeTest.*
test-tsan: deps pg
	@[ -f $(TSAN_DIR)/CMakeCache.txt ] || cmake -S . -B $(TSAN_DIR) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
	  -DAWA_TSAN=ON -DAWA_BUILD_BENCH=OFF
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

models: deps
	scripts/models

clean:
	rm -rf build build-ci build-release build-tsan
