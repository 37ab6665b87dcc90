# herdbridge — targets:
#   make build   build ./herdbridge
#   make run     start a gateway (embedded transport, no broker needed)
#   make test    vet, gofmt check, race tests incl. end-to-end and the TypeScript SDK client (what CI runs)
#   make bench   every benchmark (-count BENCHCOUNT) and, when the build has it, the load tool; writes
#                BENCHMARKS.md (BENCH_OUT): issue 15's targets, each figure against its baseline measured in
#                the same run, met or missed, with bench/notes.md's note on each miss; raw outputs in bench-out/.
#                With RMQ_URL also the broker rows (gateway<->gateway vs raw amqp091-go, RSS behind a backlog).
#                Its "Scale (issue 25)" section is make scale's last scale-out/ reports (or says to run it).
#                About 12-15 min on a 2-core machine.
#   make soak    2 gateway processes on a private broker, 50 agents, 10 min of mixed traffic with a gateway
#                kill -9 and a broker restart; writes soak-report/report.{md,json} (SOAK=30m for longer)
#   make scale   issue 25's scale harness: G real gateway processes (G=20, or a list: G="5 10 20 30") × E registered
#                entities each (E=20) on a throwaway broker (.ci/rmq.sh, first free port of SCALE_PORTS), presence by host
#                and per entity (the baseline, --presence-per-entity) in turn: convergence, join, idle deliveries/s, broker
#                and gateway CPU/RSS, bridge_roster's size; and the in-process simulation at 100 and 1,000 hosts
#                (TestPresenceSimulatedScale). Writes scale-out/scale.{json,md} and scale-out/sim.json (SCALE_OUT); make bench
#                puts them in BENCHMARKS.md. About 1 min per gateway count and mode at G=20; the simulation's 1,000 hosts
#                take ~20 min and ~17 GB (HB_SCALE_SIM_G=100 runs only its 100).
#   make fuzz    run every fuzz target for FUZZTIME each
#   make demo    run the demo exchange against a fresh in-process gateway
#   make sim     N random fault schedules (sim) over in-process gateways, checking every accepted message
#                has exactly one fate; SEED=… replays one, FAULTS=… picks the fault kinds (default all), ROUNDS=…
GO        ?= go
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
# runs of each benchmark: the report shows their median (a heavy benchmark runs once per count whatever BENCHTIME)
BENCHCOUNT ?= 3
BENCH_DIR ?= bench-out
BENCH_OUT ?= BENCHMARKS.md
# a sentence printed with the machine in the report (e.g. what else ran)
BENCH_REMARK ?=
LOADTEST_ARGS ?= --json --in-process --primaries 100 --workers 100 --register 1000 --duration 20s
SOAK      ?= 10m
SOAK_REPORT ?= soak-report
# the revision `herdbridge version` prints when go build cannot stamp one (a git worktree, -buildvcs=false)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   := -X main.revision=$(REVISION)
DIRTY     := $(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')

# make scale: gateway counts (one run per mode each), entities per gateway, where the reports go, the broker's ports to try
G          ?= 20
E          ?= 20
SCALE_OUT  ?= scale-out
SCALE_PORTS ?= 5879 5899 5919 5939

# make sim: schedules, fault kinds and rounds per schedule
N      ?= 100
FAULTS ?= all
ROUNDS ?= 25
SEED   ?=

.PHONY: build run test vet bench bench-fdatasync soak scale fuzz demo sim clean

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
	$(GO) test -count=1 -run '^TestPresenceCostLinearInHosts$$' -v ./bridge/memnet/memnettest/  # a count, not a race: see its race_on_test.go

# The report is written even when a benchmark fails (its rows say so); then make exits with go test's status.
# The load tool exits 1 when its run had errors but still prints its report: the report judges it.
bench:
	@mkdir -p $(BENCH_DIR)
	@cat /proc/loadavg > $(BENCH_DIR)/loadavg-start.txt 2>/dev/null || true
	@{ $(GO) test -p 1 -run '^$$' -bench . -benchmem -v -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 40m \
	    ./bridge/ ./keys/ ./gateway/ ./cmd/herdbridge/ ./metrics/ ./mcp/ 2>&1; echo $$? > $(BENCH_DIR)/bench.rc; } | tee $(BENCH_DIR)/bench.txt
	@$(MAKE) --no-print-directory bench-fdatasync
	@$(GO) build -ldflags "$(LDFLAGS)" -o $(BENCH_DIR)/herdbridge ./cmd/herdbridge
	@rm -f $(BENCH_DIR)/load.json; why="load tool missing: herdbridge loadtest is not in this build"; \
	  if $(BENCH_DIR)/herdbridge --help | grep -q '^  loadtest '; then \
	    echo "herdbridge loadtest $(LOADTEST_ARGS)"; \
	    $(BENCH_DIR)/herdbridge loadtest $(LOADTEST_ARGS) > $(BENCH_DIR)/load.json 2> $(BENCH_DIR)/load.err; \
	    why="herdbridge loadtest printed no report: see $(BENCH_DIR)/load.err"; \
	  fi; \
	  rm -f $(BENCH_DIR)/herdbridge; \
	  $(GO) run ./internal/benchreport/cmd -bench $(BENCH_DIR)/bench.txt -load $(BENCH_DIR)/load.json -load-missing "$$why" \
	    -notes bench/notes.md -loadavg-start $(BENCH_DIR)/loadavg-start.txt -commit "$(REVISION)$(DIRTY)" \
	    -scale $(SCALE_OUT)/scale.json -sim $(SCALE_OUT)/sim.json \
	    $(if $(RMQ_URL),-broker) -remark "$(BENCH_REMARK)" -out $(BENCH_OUT)
	@echo "wrote $(BENCH_OUT); raw outputs in $(BENCH_DIR)/"
	@exit $$(cat $(BENCH_DIR)/bench.rc)

# fdatasyncs per stdio send+poll (issue 25's P1): strace counts them around 100 and 2,100 round trips
# of BenchmarkRoundTrip/stdio/bridge, so the gateways' start-up commits cancel out; one line in
# bench.txt for the report. Without strace the report's row says "not measured".
bench-fdatasync:
	@if ! command -v strace >/dev/null; then echo "strace missing: fdatasyncs per round trip not counted"; exit 0; fi; \
	  $(GO) test -c -o $(BENCH_DIR)/gateway.test ./gateway/ || exit 1; \
	  for n in 100 2100; do \
	    strace -f -c -e trace=fdatasync,fsync -o $(BENCH_DIR)/strace-$$n.txt $(BENCH_DIR)/gateway.test \
	      -test.run '^$$' -test.bench 'RoundTrip/stdio/bridge$$' -test.benchtime $${n}x > /dev/null || exit 1; \
	  done; \
	  calls() { awk '$$NF=="fdatasync"||$$NF=="fsync"{s+=$$4} END{print s+0}' $$1; }; \
	  a=$$(calls $(BENCH_DIR)/strace-100.txt); b=$$(calls $(BENCH_DIR)/strace-2100.txt); \
	  per=$$(awk -v a=$$a -v b=$$b 'BEGIN{printf "%.3f", (b-a)/2000}'); \
	  echo "strace: $$a fdatasync+fsync calls over 100 round trips, $$b over 2,100: $$per a round trip"; \
	  echo "BenchmarkFdatasyncPerRoundTrip 1 $$per fdatasync/op" >> $(BENCH_DIR)/bench.txt; \
	  rm -f $(BENCH_DIR)/gateway.test

soak:
	HB_SOAK=$(SOAK) HB_SOAK_STRICT=1 HB_SOAK_REPORT=$(abspath $(SOAK_REPORT)) $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 90m ./loadtest/

# The simulation runs first (its test may not exist yet in a build: then it writes nothing and the report says so);
# then the broker starts and TestScale runs every G in both modes on it. Exit status: the harness's, else the simulation's.
scale: SHELL := /bin/bash
scale: build
	@mkdir -p $(SCALE_OUT); rm -f $(SCALE_OUT)/sim.json $(SCALE_OUT)/scale.json $(SCALE_OUT)/scale.md
	@{ HB_SCALE_JSON=$(abspath $(SCALE_OUT))/sim.json $(GO) test -count=1 -run '^TestPresenceSimulatedScale$$' \
	    ./bridge/memnet/memnettest/ -v -timeout 60m 2>&1; echo $$? > $(SCALE_OUT)/sim.rc; } | tee $(SCALE_OUT)/sim.txt
	@[ -s $(SCALE_OUT)/sim.json ] || echo "make scale: TestPresenceSimulatedScale wrote no $(SCALE_OUT)/sim.json (see $(SCALE_OUT)/sim.txt): the report says the simulation was not measured"
	@. .ci/rmq.sh; started=; for p in $(SCALE_PORTS); do rmq_start $$p && { started=1; break; }; done; \
	  [ -n "$$started" ] || { echo "make scale: no broker started on any of $(SCALE_PORTS)"; exit 1; }; trap rmq_stop EXIT; \
	  echo "make scale: broker $$RMQ_URL (beam.smp $$RMQ_BEAM_PID), G=\"$(G)\" E=$(E)"; \
	  HB_SCALE_G="$(G)" HB_SCALE_E="$(E)" HB_SCALE_BIN=$(abspath herdbridge) HB_SCALE_OUT=$(abspath $(SCALE_OUT)) \
	    HB_SCALE_SIM=$(abspath $(SCALE_OUT))/sim.json HB_SCALE_COMMIT="$(REVISION)$(DIRTY)" \
	    $(GO) test -count=1 -run '^TestScale$$' -v -timeout 120m ./loadtest/ 2>&1 | tee $(SCALE_OUT)/scale.txt; \
	  rc=$${PIPESTATUS[0]}; echo "wrote $(SCALE_OUT)/scale.json and $(SCALE_OUT)/scale.md"; \
	  [ $$rc = 0 ] || exit $$rc; exit $$(cat $(SCALE_OUT)/sim.rc)

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzFromHeaders$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzPresenceBody$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzControlBody$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzParseDeadLetterNotice$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./bridge/history/
	$(GO) test -run '^$$' -fuzz '^FuzzScan$$' -fuzztime $(FUZZTIME) ./bridge/audit/
	$(GO) test -run '^$$' -fuzz '^FuzzToolArgs$$' -fuzztime $(FUZZTIME) ./mcp/
	$(GO) test -run '^$$' -fuzz '^FuzzRosterCursor$$' -fuzztime $(FUZZTIME) ./mcp/
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
	$(GO) test -run '^$$' -fuzz '^FuzzParseBench$$' -fuzztime $(FUZZTIME) ./internal/benchreport/
	$(GO) test -run '^$$' -fuzz '^FuzzParseLoad$$' -fuzztime $(FUZZTIME) ./internal/benchreport/
	$(GO) test -run '^$$' -fuzz '^FuzzParseScale$$' -fuzztime $(FUZZTIME) ./internal/benchreport/
	$(GO) test -run '^$$' -fuzz '^FuzzParseSim$$' -fuzztime $(FUZZTIME) ./internal/benchreport/
	$(GO) test -run '^$$' -fuzz '^FuzzSealedEnvelope$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzOpenBroadcast$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzSnapshotPage$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzPresenceDigest$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzPresenceDelta$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzJSONCost$$' -fuzztime $(FUZZTIME) ./bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecords$$' -fuzztime $(FUZZTIME) ./bridge/store/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeAck$$' -fuzztime $(FUZZTIME) ./bridge/embedded/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodePub$$' -fuzztime $(FUZZTIME) ./bridge/embedded/
	$(GO) test -run '^$$' -fuzz '^FuzzFenceWriter$$' -fuzztime $(FUZZTIME) ./mcp/
	$(GO) test -run '^$$' -fuzz '^FuzzLeaseBodies$$' -fuzztime $(FUZZTIME) ./mcp/
	$(GO) test -run '^$$' -fuzz '^FuzzPromptFence$$' -fuzztime $(FUZZTIME) ./herdr/

sim:
	$(GO) test ./sim -run 'TestSim$$' -count=1 -v -timeout 0 -sim.faults=$(FAULTS) -sim.rounds=$(ROUNDS) \
	  $(if $(SEED),-sim.seed=$(SEED),-sim.n=$(N))

demo:
	$(GO) run ./cmd/herdbridge demo --state-dir /nonexistent-herdbridge-demo

clean:
	rm -f herdbridge
	rm -rf $(BENCH_DIR) $(SCALE_OUT)
