# Unsay — two commands on a fresh machine: `make run` and `make test`.
# Go 1.26 is all `make build`/`make run` need; `make test` also uses Node ≥ 20
# (and Chromium) for the whole-program suites — `bash .ci/run` installs them.

GO      ?= go
BIN     := bin/unsay
ADDR    ?= 127.0.0.1:8080
URL     ?= http://$(ADDR)
DB      ?= ./unsay.db
BENCH_N ?= 200
BENCH_RATE ?= 500
BENCH_FANOUT ?= 1000
BENCH_ROUNDS ?= 3
PEERS_OUT ?= bin/bench-peers.json
# fuzz: time per target; FUZZ_TARGETS lists package:FuzzName pairs
FUZZTIME ?= 60s
FUZZFLAGS ?=
FUZZ_TARGETS ?= ./skill:FuzzEscapeSSML ./skill:FuzzVerifyRequestBody ./skill:FuzzParseEnvelope_DecodesAsEncodingJSONDoes ./skill:FuzzNormalizeCertURL ./bridge:FuzzCursor ./bridge/httpapi:FuzzWriteBody ./models:FuzzParseURI ./store/envelope:FuzzOpen

.PHONY: all build run test test-e2e demo bench bench-peers fuzz skill-package clean

all: build

# `unsay version` prints these (the build stamps no VCS data where GOFLAGS has -buildvcs=false).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)

## build: compile the unsay binary into bin/unsay
build:
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $(BIN) .

## run: build, then serve on $(ADDR) with SQLite at $(DB) (demo seed on first start),
## Alexa in development mode (verification off, every Echo is Ray's: loopback only);
## prints the card's link, a clinician token (read + write) and what to try first.
## `make run ADDR=127.0.0.1:9090 DB=/tmp/ray.db` picks another port and file (not port 0:
## the printed tokens name the URL).
run: build
	@read_tok=$$($(BIN) token --patient ray --scope care.read.user --sub echo-show --ttl 24h --public-url $(URL) 2>/dev/null) || read_tok="(unsay token failed)"; \
	clin_tok=$$($(BIN) token --patient ray --scope care.read.user --scope care.write --sub okafor --ttl 8h --public-url $(URL) 2>/dev/null) || clin_tok="(unsay token failed)"; \
	echo "Unsay for Ray, on $(URL) — SQLite $(DB)"; \
	echo "  Echo Show card:   $(URL)/echo.html#token=$$read_tok"; \
	echo "  clinician page:   $(URL)/clinician  — sign in as okafor (reads what Ray hears, writes) with:"; \
	echo "                    $$clin_tok"; \
	echo "  talk as Ray:      $(BIN) ask --url $(URL) \"what's my walking instruction\""; \
	echo "  revise it:        $(BIN) write --url $(URL) --patient ray --domain weight_bearing --value \"Full weight-bearing as tolerated.\" --author okafor --author-label \"Sarah Okafor, physio\""; \
	echo
	exec $(BIN) serve --addr $(ADDR) --db $(DB) --public-url $(URL) --alexa-verify=false --default-patient ray

## test: go vet, gofmt, go test -race ./..., then the whole-program suites in test/
## (one count per part, then "N passed, N failed, N skipped"); UNSAY_REQUIRE_ALL=1
## turns a missing tool into a failure
test: build
	$(GO) run ./test/runner -bin $(BIN)

## test-e2e: only the whole-program suites (RUN=regexp narrows them)
test-e2e: build
	$(GO) run ./test/runner -bin $(BIN) -skip-unit $(if $(RUN),-run '$(RUN)')

## demo: the main job as a script, printing the transcript
demo: build
	$(GO) run ./test/demo -bin $(BIN)

## bench: figures only — the Go benchmarks of the store, the MCP bridge and the skill, then
## test/bench against the real binary: unsay bench (write → MCP client → spoken retraction),
## durable publishes/s with concurrent writers (SQLite; Postgres with UNSAY_TEST_POSTGRES),
## the TS-SDK client of test/peers/mcp-live (write → client holds value, write → 201), verified
## LaunchRequests closed loop (wrk C=32) and open loop (vegeta, $(BENCH_RATE) req/s) with CPU
## per request, fan-out to $(BENCH_FANOUT) sessions and memory per idle session — one table, with
## the Node peers' figures of the last `make bench-peers` beside them
bench: build
	@echo "== $$(nproc) cores; $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average $$(cut -d' ' -f1-3 /proc/loadavg)"
	$(GO) test -run '^$$' -bench . -benchtime $(BENCH_N)x ./store/... ./bridge/... ./skill/... | grep -E '^(Benchmark|FAIL|panic)'
	$(GO) run ./test/bench -bin $(BIN) -own -n $(BENCH_N) -rate $(BENCH_RATE) -fanout $(BENCH_FANOUT) -last $(PEERS_OUT)

## bench-peers: the Node peers (test/peers: TS MCP SDK, ASK SDK; Node and npm only) and unsay
## with the same clients — mcp-live, wrk, vegeta — back to back, alternating, $(BENCH_ROUNDS)
## rounds; prints medians and ratios and saves them to $(PEERS_OUT) for `make bench`
bench-peers: build
	$(GO) run ./test/bench -bin $(BIN) -peers -rounds $(BENCH_ROUNDS) -n $(BENCH_N) -rate $(BENCH_RATE) -fanout 0 -save $(PEERS_OUT)

## fuzz: run every fuzz target for FUZZTIME each (default 60s; FUZZFLAGS=-parallel=1 on a
## shared machine). New failing inputs land in the package's testdata/fuzz/ and then fail
## `make test` (go test runs every committed corpus entry) until fixed.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "== $$fn ($$pkg) for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$pkg; \
	done

## skill-package: write skill-package/build/ (ask-resources.json + skill-package/) with the
## endpoint PUBLIC_URL/alexa; then `cd skill-package/build && ask deploy`
skill-package:
	@test -n "$(PUBLIC_URL)" || { echo "usage: make skill-package PUBLIC_URL=https://your.host"; exit 2; }
	$(GO) run ./skill-package/gen -public-url $(PUBLIC_URL) -out skill-package/build

## clean: remove build output and test artifacts (keeps ./unsay.db)
clean:
	rm -rf bin test/artifacts skill-package/build
