# Packages (nfpm.yaml): `make package` builds dist/xlb_VERSION-1_ARCH.deb
# and dist/xlb-VERSION-1.ARCH.rpm, with man pages and a changelog whose
# newest entry is VERSION (packaging/changelog.yml through
# packaging/changelog). Included by the top-level Makefile.
#
#   PKG_VERSION   package version; default: packaging/version.sh (git describe)
#   PKG_OUT       output directory (default dist); the staging tree is PKG_OUT/stage
#   PKG_ARCH      GOARCH of the binaries (default: the Go toolchain's)
#   PKG_MAINTAINER "Name <address>" for the package metadata

NFPM_VERSION   := v2.45.2
NFPM           := $(CURDIR)/.cache/bin/nfpm
PKG_VERSION    ?= $(shell packaging/version.sh)
PKG_OUT        ?= dist
PKG_ARCH       ?= $(shell $(GO) env GOARCH)
PKG_MAINTAINER ?= XLB maintainers <maintainers@xlbproject.invalid>
PKG_STAGE      := $(PKG_OUT)/stage
# Package release (the "-1" of 1.2.3-1); the changelog names it too.
PKG_RELEASE    := 1
# Binaries in packages report the package version (xlb --version); -s -w
# drop the symbol table and DWARF (stack traces keep function names).
PKG_LDFLAGS    := -s -w -X github.com/xlbproject/xlb/pkg/buildinfo.Version=$(PKG_VERSION) \
                  -X github.com/xlbproject/xlb/pkg/buildinfo.Revision=$(REVISION)
PKG_CMDS       := $(wildcard cmd/xlb cmd/xlbctl)
# File times in the packages: the commit's, so a rebuild is identical.
PKG_EPOCH      ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)

# Debian packages the package build, its tests and the host lab need
# (systemd for systemd-analyze on the build host; PID 1 need not be systemd;
# lintian checks the .deb; man-db renders the man pages with --warnings).
APT_PACKAGES   += rpm debootstrap systemd-container systemd lintian man-db

.PHONY: package package-tools test-packages test-hostlab hostlab-rootfs

# A pinned nfpm, built once into .cache/bin (git-ignored). flock: test
# packages building in parallel share it.
$(NFPM):
	@mkdir -p $(dir $@)
	flock $(dir $@).nfpm.lock sh -c 'test -x $@ || GOBIN=$(dir $@) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)'

package-tools: $(NFPM)

package: $(NFPM)
	@test -n "$(PKG_VERSION)" || { echo "package: no version (set PKG_VERSION)" >&2; exit 1; }
	rm -rf $(PKG_STAGE) $(PKG_OUT)/xlb_*.deb $(PKG_OUT)/xlb-*.rpm
	mkdir -p $(PKG_STAGE)/bin
	for c in $(PKG_CMDS); do \
		CGO_ENABLED=0 GOARCH=$(PKG_ARCH) $(GO) build -trimpath -ldflags '$(PKG_LDFLAGS)' -o $(PKG_STAGE)/bin/ ./$$c || exit 1; \
	done
	gzip -9n < packaging/xlb.8 > $(PKG_STAGE)/xlb.8.gz
	gzip -9n < packaging/xlbctl.1 > $(PKG_STAGE)/xlbctl.1.gz
	$(GO) run ./packaging/changelog -in packaging/changelog.yml -out $(PKG_STAGE)/changelog.yml \
		-version '$(PKG_VERSION)' -release '$(PKG_RELEASE)' -date '$(PKG_EPOCH)' -packager '$(PKG_MAINTAINER)'
	for f in deb rpm; do \
		{ cat nfpm.yaml; echo 'changelog: $(abspath $(PKG_STAGE))/changelog.yml'; } | \
		XLB_PKG_VERSION='$(PKG_VERSION)' XLB_PKG_RELEASE='$(PKG_RELEASE)' XLB_PKG_ARCH='$(PKG_ARCH)' \
		XLB_PKG_STAGE='$(abspath $(PKG_STAGE))' XLB_PKG_MAINTAINER='$(PKG_MAINTAINER)' \
		SOURCE_DATE_EPOCH='$(PKG_EPOCH)' \
		$(NFPM) package --config - --packager $$f --target $(PKG_OUT)/ || exit 1; \
	done
	@ls -l $(PKG_OUT)/*.deb $(PKG_OUT)/*.rpm

# Host lab: a Debian bookworm root filesystem (debootstrap, cached here,
# rebuilt when missing) booted with systemd-nspawn for the package tests.
HOSTLAB_CACHE ?= /var/cache/xlb-hostlab
export HOSTLAB_CACHE

# Inspection of the built packages (file lists, modes, conffiles, scripts,
# systemd-analyze verify); part of `make test`.
test-packages: deps
	$(GO) test -count=1 -v ./test/pkgtest/

# The booted-container tests alone (root; debootstrap on first run).
test-hostlab: deps
	$(GO) test -count=1 -timeout 20m -v ./test/hostlab/

# Build (or reuse) the cached root filesystem without running tests.
hostlab-rootfs: deps
	$(GO) test -count=1 -v -run '^TestRootfs$$' ./test/hostlab/
