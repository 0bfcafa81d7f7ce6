# XLB — see README.md. Everything here runs as root on Debian 12.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH   ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/xlbproject/xlb/pkg/buildinfo.Version=$(VERSION) \
            -X github.com/xlbproject/xlb/pkg/buildinfo.Revision=$(REVISION) \
            -X github.com/xlbproject/xlb/pkg/buildinfo.Branch=$(BRANCH)
GO       ?= go
BIN      := bin

# Debian packages the build and tests need (clang/llvm/libbpf-dev only to
# regenerate the BPF objects, which are committed). packaging/*.mk adds
# what the package checks, the host lab and the fleet need. hping3 (the
# SYN flood) and iptables (the kernel-NAT reference of the churn
# benchmark) serve the lab tests of test/e2e; bird2 is the real BGP router
# pkg/bgp's tests peer with (each test runs its own bird in a namespace);
# prometheus brings promtool, which checks observability/'s alert rules;
# chromium (headless) renders the admin console in a lab test; curl checks
# the secured listeners (TLS, basic auth) as a client would.
# Both packages come with a service Debian starts on install: deps installs
# with a policy-rc.d that refuses to start services (unless the host has
# one), then disables the services of the packages it installed
# (DEPS_SERVICES), so nothing listens on the host after it.
APT_PACKAGES := clang llvm libbpf-dev linux-libc-dev iproute2 util-linux hping3 iptables nftables bird2 prometheus chromium curl
DEPS_SERVICES := bird2:bird.service prometheus:prometheus.service

.PHONY: all build deps generate check-generated vet test test-unit test-e2e bench bench-deps bench-peers demo clean

all: build

build: $(BIN)/xlb $(BIN)/xlbctl

GO_SOURCES := $(shell find cmd pkg -name '*.go' -o -name '*.o' -o -name '*.html' -o -name '*.js' -o -name '*.css') go.mod go.sum

$(BIN)/xlb: $(GO_SOURCES)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/xlb

$(BIN)/xlbctl: $(GO_SOURCES)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/xlbctl

# Install missing Debian packages (needs root and apt).
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		policy=""; if [ ! -e /usr/sbin/policy-rc.d ]; then policy=/usr/sbin/policy-rc.d; \
			printf '#!/bin/sh\nexit 101\n' >$$policy && chmod 755 $$policy; fi; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		rc=$$?; [ -z "$$policy" ] || rm -f $$policy; [ $$rc -eq 0 ] || exit $$rc; \
		for ps in $(DEPS_SERVICES); do case " $$missing " in *" $${ps%%:*} "*) \
			if [ -d /run/systemd/system ]; then systemctl disable --now $${ps#*:} >/dev/null 2>&1 || true; fi;; \
		esac; done; \
	fi

# Compile bpf/*.c with clang through bpf2go: every go:generate directive
# under pkg/dataplane (the XDP program; pkg/dataplane/floor, the benchmark
# floor), then write pkg/limits from the program's enum xlb_limits
# (internal/genlimits) and pkg/dataplane/pins' declarations of the pinned
# structs (internal/gentypes).
GENERATED := ':(glob)pkg/dataplane/**/*_bpfel.go' ':(glob)pkg/dataplane/**/*_bpfel.o' ':(glob)pkg/dataplane/**/*_gen.go' ':(glob)pkg/limits/*_gen.go'

generate: deps
	cd pkg/dataplane && $(GO) generate ./...

# Fail when the committed BPF objects or bindings differ from what the
# C sources compile to, or when a generated file is new or gone.
check-generated: generate
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		git status --short -- $(GENERATED); \
		echo "generated BPF objects or limits are stale: run 'make generate' and commit them" >&2; exit 1; \
	fi
	@echo "generated BPF objects and limits are current"

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_bpfel.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The whole suite: unit, packet fixtures (BPF_PROG_TEST_RUN), lab end to end.
# The capacity tests (test/e2e TestCapacity*: paced churn below and above
# the configured capacity, a SYN flood, an RST storm; TestTimewaitReuse*,
# issue 36's churn at a share of the lab's full rate) judge connection
# latencies (no connect may wait for a SYN retransmit), so they run first
# and alone; beside the fleet and the host lab (booting containers) a
# connect can stall for longer than a retransmit.
# Then the fleet (test/fleet, the longest package: about 9.5 minutes)
# runs from the start beside every other package instead of after them
# (go test ./... reaches it last); its output is printed when it ends.
# The package timeout leaves room for the fleet beside other work.
# TestUDPLongLived (issue 31: a UDP flow with a datagram every 20 s for
# 2 minutes, on the real clock) waits, nearly idle, for about 125 s: it
# runs beside the fleet too, and the main run skips it.
CAPACITY_TESTS := ^(TestCapacity|TestTimewaitReuse)
SIDE_TESTS := ^TestUDPLongLived$$
FLEET_PKG := github.com/xlbproject/xlb/test/fleet

test: deps check-generated vet
	$(GO) test -count=1 -timeout 15m -run '$(CAPACITY_TESTS)' ./test/e2e/
	@out=$$(mktemp); side=$$(mktemp); trap 'rm -f $$out $$side' EXIT; \
	$(GO) test -count=1 -timeout 45m $(FLEET_PKG) >$$out 2>&1 & fleet=$$!; \
	$(GO) test -count=1 -timeout 15m -run '$(SIDE_TESTS)' ./test/e2e/ >$$side 2>&1 & sidep=$$!; \
	$(GO) test -count=1 -timeout 45m -skip '$(CAPACITY_TESTS)|$(SIDE_TESTS)' $$($(GO) list ./... | grep -vx '$(FLEET_PKG)'); rc=$$?; \
	wait $$sidep; src=$$?; cat $$side; \
	wait $$fleet; frc=$$?; cat $$out; \
	[ $$rc -eq 0 ] && [ $$src -eq 0 ] && [ $$frc -eq 0 ]

test-unit:
	$(GO) test -count=1 ./pkg/... ./internal/...

test-e2e: build
	XLB_BINARY=$(abspath $(BIN)/xlb) $(GO) test -count=1 -timeout 30m -v ./test/e2e/

# Benchmarks (never part of `make test`).
# pkg/maintenance: 1x, each case builds its own table and measures at least
# 30 cycles (Nx with N > 1 would build every table twice).
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 100000x ./pkg/dataplane/
	$(GO) test -run '^$$' -bench . -benchtime 1x ./pkg/sched/
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./pkg/maintenance/
	XLB_BINARY=$(abspath $(BIN)/xlb) $(GO) test -run '^$$' -bench 'Lab(Throughput|Connections)' -benchtime 5x ./test/e2e/
	XLB_BINARY=$(abspath $(BIN)/xlb) $(GO) test -run '^$$' -bench LabHandOff -benchtime 20x -timeout 30m ./test/e2e/
	XLB_BINARY=$(abspath $(BIN)/xlb) $(GO) test -run '^$$' -bench LabChurn -benchtime 1x -timeout 60m -v ./test/e2e/

# XLB against its peers (issue 17): every peer with the same loads in the
# one-arm lab, interleaved; a Markdown report, JSON and a PNG plot in a
# results directory (test/benchpeers/doc.go). A full run takes about 105
# minutes; BENCH_PEERS_QUICK=1 is a development run, BENCH_PEERS_PEERS and
# BENCH_PEERS_LOADS pick subsets, BENCH_PEERS_FLAGS passes flags (e.g.
# -doc docs/benchmarks.md). Needs haproxy, nginx and libnginx-mod-stream.
# The peers' packages, installed by bench-peers only (make test needs none
# of them), their services kept from starting like make deps's.
BENCH_APT_PACKAGES := haproxy nginx libnginx-mod-stream
BENCH_DEPS_SERVICES := haproxy:haproxy.service nginx:nginx.service

bench-deps:
	$(MAKE) --no-print-directory deps APT_PACKAGES="$(BENCH_APT_PACKAGES)" DEPS_SERVICES="$(BENCH_DEPS_SERVICES)"

bench-peers: build bench-deps
	XLB_BINARY=$(abspath $(BIN)/xlb) $(GO) run ./test/benchpeers $(BENCH_PEERS_FLAGS)

demo: build
	$(GO) run ./test/demo -xlb $(BIN)/xlb -xlbctl $(BIN)/xlbctl

clean:
	rm -rf $(BIN) dist

# Packaging, host lab and fleet targets live next to what they build.
-include packaging/*.mk
