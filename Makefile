# herdbridge — targets:
#   make build   build ./herdbridge
#   make run     start a gateway (embedded transport, no broker needed)
#   make test    vet, gofmt check, race tests incl. end-to-end and the TypeScript SDK client (what CI runs)
#   make bench   benchmarks: MCP round trips vs a no-op tool, core send->drain, RSS with 10k held,
#                envelope sign/verify, a /metrics scrape with 1,000 entities; with RMQ_URL: gateway<->gateway vs raw amqp091-go, signed vs unsigned
#   make soak    2 gateway processes on a private broker, 50 agents, 10 min of mixed traffic with a gateway
#                kill -9 and a broker restart; writes soak-report/report.{md,json} (SOAK=30m for longer)
#   make fuzz    run every fuzz target for FUZZTIME each
#   make demo    run the demo exchange against a fresh in-process gateway
GO        ?= go
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
SOAK      ?= 10m
SOAK_REPORT ?= soak-report
# the revision `herdbridge version` prints when go build cannot stamp one (a git worktree, -buildvcs=false)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   := -X main.revision=$(REVISION)

.PHONY: build run test vet bench soak fuzz demo clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o herdbridge ./cmd/herdbridge

run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/herdbridge gateway

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: vet
	$(GO) test -race -count=1 -p 1 -timeout 20m ./...

bench:
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 5 -timeout 30m ./bridge/ ./keys/ ./gateway/ ./cmd/herdbridge/ ./metrics/

soak:
	HB_SOAK=$(SOAK) HB_SOAK_STRICT=1 HB_SOAK_REPORT=$(abspath $(SOAK_REPORT)) $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 90m ./loadtest/

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzFromHeaders$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzPresenceBody$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzControlBody$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzParseHistory$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzToolArgs$$' -fuzztime $(FUZZTIME) ./mcp/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeReply$$' -fuzztime $(FUZZTIME) ./herdr/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME) ./herdr/
	$(GO) test -run '^$$' -fuzz '^FuzzSanitize$$' -fuzztime $(FUZZTIME) ./herdr/
	$(GO) test -run '^$$' -fuzz '^FuzzParseHeader$$' -fuzztime $(FUZZTIME) ./bridge/store/
	$(GO) test -run '^$$' -fuzz '^FuzzWalkPages$$' -fuzztime $(FUZZTIME) ./bridge/store/
	$(GO) test -run '^$$' -fuzz '^FuzzComposerDraft$$' -fuzztime $(FUZZTIME) ./herdr/
	$(GO) test -run '^$$' -fuzz '^FuzzStampRequestID$$' -fuzztime $(FUZZTIME) ./gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzParseTrust$$' -fuzztime $(FUZZTIME) ./keys/
	$(GO) test -run '^$$' -fuzz '^FuzzParsePublicKey$$' -fuzztime $(FUZZTIME) ./keys/
	$(GO) test -run '^$$' -fuzz '^FuzzParseMessage$$' -fuzztime $(FUZZTIME) ./keys/pairing/
	$(GO) test -run '^$$' -fuzz '^FuzzParseCode$$' -fuzztime $(FUZZTIME) ./keys/pairing/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSpool$$' -fuzztime $(FUZZTIME) ./bridge/embedded/
	$(GO) test -run '^$$' -fuzz '^FuzzParseTraceRequest$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzParseTraceAnswer$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzEventLabels$$' -fuzztime $(FUZZTIME) ./metrics/
	$(GO) test -run '^$$' -fuzz '^FuzzParseEventID$$' -fuzztime $(FUZZTIME) ./opsui/
	$(GO) test -run '^$$' -fuzz '^FuzzSameOrigin$$' -fuzztime $(FUZZTIME) ./opsui/

demo:
	$(GO) run ./cmd/herdbridge demo --state-dir /nonexistent-herdbridge-demo

clean:
	rm -f herdbridge
