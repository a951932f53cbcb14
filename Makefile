# zflow — see README.md. Every target works on a fresh clone.
GO      ?= go
PYTHON  ?= /usr/bin/python3
BIN     := bin/zflow
FUZZTIME ?= 3000x

.PHONY: build test demo bench lint fixtures fuzz clean conformance unseen

build:
	$(GO) build -o $(BIN) ./cmd/zflow

# The test command of the README and of .ci/run: Go tests (the short fuzz
# runs included) and the capture package's pytest suite. It must stay
# under 10 minutes on 2 cores: the Go tests over ../shared/conformance
# (TestShared*) skip here and run in `make conformance`.
test: build
	$(GO) vet ./...
	$(GO) test -timeout 20m ./...
	$(MAKE) --no-print-directory fuzz
	./scripts/pytest.sh

# The main job on the embedded fixtures: discover the semantics of a
# captured reference, generate with them, and diff the run against the
# reference boundary by boundary.
DEMO_DIR ?= /tmp/zflow-demo
demo: build
	@mkdir -p $(DEMO_DIR)
	./$(BIN) inspect fixtures/dit/dit-bf16.npz --depth 2 --step 0
	./$(BIN) discover --trace fixtures/dit/dit-bf16.npz --precision -o $(DEMO_DIR)/semantics.json
	./$(BIN) generate --semantics $(DEMO_DIR)/semantics.json --inputs fixtures/dit/dit-bf16.npz -o $(DEMO_DIR)/latents.npz --trace-out $(DEMO_DIR)/ours.npz
	./$(BIN) diff $(DEMO_DIR)/ours.npz fixtures/dit/dit-bf16.npz --only-failing --plot $(DEMO_DIR)/plots
	./$(BIN) diff fixtures/faults/wrong_activation.npz fixtures/faults/ref.npz --only-failing --plot $(DEMO_DIR)/plots-fault || echo "(a planted fault, caught: exit $$?)"

# Discovery over every fixture of fixtures/unseen (real architectures the
# shared set does not hold: complete, self-checked, generating their
# output); make test runs a sample of them, .ci/run calls this too.
unseen:
	ZFLOW_UNSEEN=all $(GO) test -timeout 30m -run '^TestUnseenArchitectures$$' ./search/synth/

# The Go tests over the shared traces (ZFLOW_CONFORMANCE=1 go test -run
# '^TestShared' ./search/synth/ ./cmd/zflow/), the shared conformance table
# and its regression gate (scripts/conformance-passing.txt); all skipped
# without ../shared/conformance.
conformance: build
	GO=$(GO) ./scripts/conformance.sh

bench: build
	./scripts/bench.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) build ./...

fixtures:
	$(GO) generate ./fixtures

# Brief fuzzing of the trace readers, the manifest validator and the
# semantics parser; the seed corpora live in trace/testdata/fuzz (and the
# f.Add seeds) and run on every plain `go test` too.
fuzz:
	$(GO) test ./trace -run '^$$' -fuzz '^FuzzOpenNpz$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./trace -run '^$$' -fuzz '^FuzzOpenSafetensors$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./trace -run '^$$' -fuzz '^FuzzNpyHeader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./trace -run '^$$' -fuzz '^FuzzManifest$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./semantics -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0

clean:
	rm -rf bin
