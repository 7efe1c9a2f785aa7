# SMG-Go. `make demo` shows it working, `make test` proves it (README.md).

GO        ?= go
BIN       := bin
COMMANDS  := ./cmd/smg ./cmd/mockworker ./cmd/loadgen ./bench/bareproxy ./bench/cmd/smgbench

.PHONY: all build image tools proto test bench bench-smoke bench-scale demo fmt vet fuzz clean

all: build

## build: compile smg, mockworker, loadgen and the benchmark tools into bin/
build:
	$(GO) build -buildvcs=true -o $(BIN)/ $(COMMANDS)

## image: the gateway's container image, built without a container daemon (hack/image): a static
## smg, the CA roots and user 65532 on an empty base, named as the Helm chart's default image
## (values.yaml image.repository : Chart.yaml appVersion); bin/smg-image.tar (for crane push,
## docker load, podman load) and the OCI layout bin/smg-oci. Reproducible: the same commit and Go
## give the same digest.
image:
	$(GO) run ./hack/image --out $(BIN)

## tools: the kube-apiserver, etcd and helm the tests run, the tokenizer test data and the OpenAI
## Node SDK (npm), headless Chromium for loadgen's report test (Debian's chromium, apt-get when
## missing), and protoc (Debian's protobuf-compiler, apt-get when missing) with protoc-gen-go and
## protoc-gen-go-grpc, built once from source and cached outside the repo (~/.cache); a no-op
## when cached. The first build takes long (tens of minutes on 2 cores), longer than a test's
## timeout, so it runs before the tests do.
tools:
	bash hack/proto/tools.sh
	bash hack/k8s/build.sh "$$HOME/.cache/k8s-test-bin/v1.37.2"
	bash hack/helm/build.sh >/dev/null
	bash hack/promtool/build.sh >/dev/null
	bash hack/chromium/install.sh >/dev/null
	bash hack/tokenizer/fetch.sh
	bash hack/openai-node/fetch.sh

## proto: regenerate the engines' gRPC packages (engine/commonpb, engine/sglangpb, engine/vllmpb)
## from engine/proto (docs/grpc.md); engine's TestGeneratedCodeIsCurrent fails until this is run
proto:
	bash hack/proto/tools.sh
	bash hack/proto/gen.sh

## test: the tools, gofmt check, go vet, and every test under the race detector (what CI runs)
test: tools
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race -timeout 20m ./...
	@# the allocation tests, built without -race
	$(GO) test -timeout 10m -run 'DoesNotAllocate' ./fastpath/...

## bench: the regression gate (docs/benchmarks.md): overhead against direct, a bare fasthttp
## proxy, nginx and HAProxy; hot-path allocs/op; the routing-quality A/B table (capacity at
## saturation and TTFT at 70% load per policy and workload, plots in bin/bench-quality.html); the
## pass-through routes and EPD under wrk; fails on regression
bench: build
	$(GO) run ./bench/cmd/smgbench --bin $(BIN) --out $(BIN)/bench.json --quality-html $(BIN)/bench-quality.html

## bench-smoke: the shortened gate CI runs (2 s overhead runs, small micro cases, a 70%-load herding check)
bench-smoke: build
	$(GO) run ./bench/cmd/smgbench --bin $(BIN) --smoke --out $(BIN)/bench-smoke.json --quality-html $(BIN)/bench-smoke-quality.html

## bench-scale: fleet-scale figures (docs/benchmarks.md): the mesh at 50 in-memory routers
## (failure detection, false deaths over 10 simulated minutes at 5% loss, worker- and tree-sync
## rounds, bytes per round per router; fails when a target is missed), a frozen router among 50
## (fake time), 5 real smg routers at 5% packet loss on a namespace's loopback (hack/lossnet; needs
## root; worker sync, false deaths over 10 minutes, SIGKILL/SIGSTOP → DOWN; ~13 min; fails when a
## target is missed), then discovery at 10,000
## pods on a real kube-apiserver (Ready → routable, single-pod changes, a gateway restart, heap
## per pod, goroutines bounded; SMG_SCALE_PODS=N for another size; ~10-15 min), the same
## beside a real smg process (its pickers, health checks and load polling included; RSS and
## CPU per worker; ~15 min), then the load-aware picks at 10,000 workers
## (docs/benchmarks-policy.md)
bench-scale:
	$(GO) test -run '^$$' -bench Fleet50 -benchtime 1x ./mesh/
	$(GO) test -count=1 -run '^TestFrozenRouterIsDownWithinTheSuspicionTimeout$$' -v ./mesh/ -args -frozen-routers=50
	$(GO) build -o $(BIN)/ ./cmd/smg ./hack/lossnet
	python3 hack/mesh-failure-detection.py --smg $(BIN)/smg --lossnet $(BIN)/lossnet --loss 5 --watch-minutes 10
	$(GO) test -run '^$$' -bench '^BenchmarkDiscoveryScale$$' -benchtime 1x -timeout 40m ./discovery/k8s/
	$(GO) test -run '^$$' -bench '^BenchmarkDiscoveryScaleProcess$$' -benchtime 1x -timeout 40m ./internal/e2e/
	$(GO) test -run '^$$' -bench '^Benchmark(Pick|PickWithDispatch)$$/^workers=10000$$' -benchtime 3000x -benchmem ./policy/leastload/ ./policy/bucket/
	$(GO) test -run '^$$' -bench '^BenchmarkPick$$/./^workers=10000$$' -benchtime 3000x -benchmem ./policy/cacheaware/ ./policy/poweroftwo/
	$(GO) test -run '^$$' -bench '^BenchmarkBuildAndFirstPick/workers=10000$$' -benchtime 20x -benchmem ./policy/leastload/

## demo: a mock fleet and the gateway on loopback, a short load, a summary, then stop
demo: build
	./hack/demo.sh $(BIN)

## fmt: format every Go file
fmt:
	gofmt -w $$(git ls-files '*.go')

## fuzz: run every fuzz target for FUZZTIME each (default 10s)
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf $(BIN)
