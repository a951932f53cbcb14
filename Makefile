# zflow — see README.md. Every target works on a fresh clone.
GO      ?= go
PYTHON  ?= /usr/bin/python3
BIN     := bin/zflow
FUZZTIME ?= 3000x

.PHONY: build test demo bench lint fixtures fuzz clean

build:
	$(GO) build -o $(BIN) ./cmd/zflow

# The test command of the README and of .ci/run: Go tests (the short fuzz
# runs included) and the capture package's pytest suite.
test: build
	$(GO) vet ./...
	$(GO) test ./...
	$(MAKE) --no-print-directory fuzz
	./scripts/pytest.sh

# The main job on the embedded fixtures.
demo: build
	./$(BIN) inspect fixtures/dit/dit-bf16.npz --depth 3
	./$(BIN) inspect fixtures/toy.npz --stats --step 0
	./$(BIN) inspect fixtures/toy.safetensors --json --module 'net.block.act' | head -40

bench: build
	./scripts/bench.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) build ./...

fixtures:
	$(GO) generate ./fixtures

# Brief fuzzing of the trace readers; the seed corpora live in
# trace/testdata/fuzz and run on every plain `go test` too.
fuzz:
	$(GO) test ./trace -run '^$$' -fuzz '^FuzzOpenNpz$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./trace -run '^$$' -fuzz '^FuzzOpenSafetensors$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0
	$(GO) test ./trace -run '^$$' -fuzz '^FuzzNpyHeader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0

clean:
	rm -rf bin
