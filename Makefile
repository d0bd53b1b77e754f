# Entry points. Each target installs what it needs first, so on a fresh Debian 12
# machine `make demo` and `make test` are the only set-up commands.
#
# In CI (CI=true) the build is the sanitizer configuration with -Werror.

JOBS ?= 2
ifeq ($(CI),true)
  BUILD_DIR ?= build-ci
  CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Debug -DAWA_SANITIZE=ON -DAWA_WERROR=ON -DAWA_BUILD_BENCH=OFF
else
  BUILD_DIR ?= build
  CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
endif

# When DATABASE_URL is unset, use the project's own PostgreSQL (scripts/pg).
PG_URL = $${DATABASE_URL:-$$(scripts/pg url)}

.PHONY: all deps build pg demo test unit-test format format-check models clean

all: build

deps:
	@scripts/install-deps

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

pg: deps
	@if [ -z "$$DATABASE_URL" ]; then scripts/pg start; fi

demo: build pg
	DATABASE_URL=$(PG_URL) $(BUILD_DIR)/awa demo

test: format-check build pg
	cd $(BUILD_DIR) && DATABASE_URL=$(PG_URL) ctest --output-on-failure -j $(JOBS) --timeout 600

unit-test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -L unit

format:
	@git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

format-check: deps
	@files=$$(git ls-files '*.cpp' '*.hpp'); \
	if [ -n "$$files" ] && ! clang-format --dry-run --Werror $$files; then \
	  echo "format-check: run 'make format'"; exit 1; fi

models: deps
	scripts/models

clean:
	rm -rf build build-ci build-release
