# Seckill's front door. `make run` starts the whole system against the local
# Redis, RabbitMQ and MySQL; `make test` runs the whole suite against them.

GO      ?= go
BIN     := bin/seckill
PKGS    := ./...

.PHONY: all build run test test-race bench lint clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/seckill

## run: server + outbox relay + worker in one process (migrates first)
run: build
	./$(BIN) all

## test: the whole suite against the real services (see .ci/run to start them)
test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 8m $(PKGS)

## test-race: the suite under the race detector (slower)
test-race:
	$(GO) test -count=1 -race -timeout 30m $(PKGS)

## bench: the benchmark suite; prints markdown tables of ratios and writes BENCHMARKS.md
bench: build
	./$(BIN) bench --duration 10s --out BENCHMARKS.md

## lint: formatting and vet
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin test-artifacts
