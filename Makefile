# Seckill's front door. `make run` starts the whole system: on the local
# Redis, RabbitMQ and MySQL when they answer, else embedded in one process.
# `make test` sets up the services it needs and runs the whole suite.

GO      ?= go
BIN     := bin/seckill
PKGS    := ./...

.PHONY: all build run demo test test-race services bench lint clean

all: build

build:
	@GOPROXY=off $(GO) list -deps ./cmd/seckill >/dev/null 2>&1 || \
		echo "==> first build: downloading the Go modules Seckill uses (about 100; 3–4 minutes on 2 cores)"
	$(GO) build -o $(BIN) ./cmd/seckill

## run: the whole system (migrations, server, relay, worker) on the configured
## services if they all answer, otherwise embedded; it says which and why.
run: build
	@if ./$(BIN) check; then \
		echo "make run: Redis, RabbitMQ and MySQL answer (above): running on them."; \
		exec ./$(BIN) all; \
	else \
		echo "make run: not every service answers (above): running embedded, everything in this process (data in $${SECKILL_DATA_DIR:-./data})."; \
		exec ./$(BIN) all --embedded; \
	fi

## demo: embedded, with a sample sale opening a few seconds after start and
## simulated shoppers buying from it
demo: build
	./$(BIN) all --embedded --demo

## services: install (Debian, as root) and start what the tests need
services:
	scripts/services.sh

## test: the whole suite against the real services (started first), then
## the inventory, server and funds suites again on a 3-master Redis Cluster that
## the tests start on loopback ports of their own
test: services
	$(GO) vet $(PKGS)
	cd configs/prometheus && promtool check rules alerts.yml && promtool test rules alerts_test.yml
	$(GO) test -count=1 -timeout 8m $(PKGS)
	SECKILL_TEST_REDIS=cluster $(GO) test -count=1 -timeout 5m ./inventory ./server ./funds

## test-race: the suite under the race detector (slower)
test-race: services
	$(GO) test -count=1 -race -timeout 30m $(PKGS)

## bench: the benchmark suite; prints markdown tables of ratios and writes BENCHMARKS.md
bench: build services
	./$(BIN) bench --duration 10s --out BENCHMARKS.md --chart docs/capacity.png

## lint: formatting and vet
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin test-artifacts
