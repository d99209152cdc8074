# The Debian package, the OCI image built from it, and their tests.
#   make deb          build/python-sandbox-mcp_VERSION_ARCH.deb
#   make deb-check    lintian and the package's file list (part of make test)
#   make image        localhost/python-sandbox-mcp:VERSION (podman)
#   make test-packages  the package in a clean Debian 12 container, the image
#                     under podman's defaults, the pod under podman kube play

DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null)
DEB := build/python-sandbox-mcp_$(VERSION)_$(DEB_ARCH).deb
IMAGE := localhost/python-sandbox-mcp:$(VERSION)
.PHONY: deb deb-check man-check image test-packages test-deb test-image test-pod

## deb: build build/python-sandbox-mcp_VERSION_ARCH.deb (dpkg-shlibdeps, dpkg-gencontrol, dpkg-deb)
deb: $(DEB)
# From the optimised build only: a sanitizer build is no package.
$(DEB): $(BIN) $(BUILD)/man/python-sandbox-mcp.1 $(BUILD)/python-sandbox-mcp-install-skill \
		SKILL.md README.md $(DOCS) scripts/apparmor.sh scripts/apparmor/python-sandbox-mcp.in \
		$(wildcard packaging/debian/*) packaging/mkdeb.sh
	@[ -z "$(SANITIZE)" ] || { echo "deb: build the package without SANITIZE" >&2; exit 2; }
	rm -rf build/deb
	$(MAKE) --no-print-directory install DESTDIR=$(abspath build/deb/root) PREFIX=/usr
	packaging/mkdeb.sh build/deb $(VERSION) $@

# Quick (a few seconds): part of make test.  lintian finds nothing, not even
# at the pedantic level (each override in packaging/debian/lintian-overrides
# says why); the package holds what it promises; the man page names every
# flag of --help.
## deb-check: build the package, run lintian on it and check its file list and the man page
deb-check: $(DEB) man-check
	lintian --fail-on error,warning,info,pedantic -I --pedantic $(DEB)
	packaging/check-contents.sh $(DEB)

## man-check: fail when a flag of --help is missing from the man page
man-check: $(BIN) $(BUILD)/man/python-sandbox-mcp.1
	@missing=$$($(BIN) --help | grep -o -- '--[a-z][a-z-]*' | sort -u | while read -r f; do \
		grep -q -- "$$(printf '%s' "$$f" | sed 's/-/\\\\-/g')" $(BUILD)/man/python-sandbox-mcp.1 || echo "$$f"; done); \
	[ -z "$$missing" ] || { echo "man-check: docs/python-sandbox-mcp.1 lacks:" $$missing >&2; exit 1; }
	@LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 $(BUILD)/man/python-sandbox-mcp.1 2>&1 >/dev/null | \
		{ ! grep . >&2; } || { echo "man-check: groff warns about the man page" >&2; exit 1; }
	@echo "man-check: the man page names every flag of --help"

# The image builds from a context of its own (build/image/: the package
# only).  IMAGE_BASE: the base image; the tests pass their offline Debian 12
# (packaging/debian-base.sh) and podman build's network is the host's.
IMAGE_BASE ?= docker.io/library/debian:12-slim
IMAGE_FLAGS ?=
## image: build the OCI image localhost/python-sandbox-mcp:VERSION from the package (podman; IMAGE_BASE=... to change the base)
image: $(DEB)
	@command -v podman >/dev/null || { echo "image: podman is missing: scripts/setup.sh podman runc" >&2; exit 2; }
	rm -rf build/image && mkdir -p build/image && cp $(DEB) build/image/
	@old=$$(podman image inspect -f '{{.Id}}' $(IMAGE) 2>/dev/null || true); \
	podman build --network=host $(IMAGE_FLAGS) -f packaging/Containerfile --build-arg BASE=$(IMAGE_BASE) \
		--build-arg DEB=$(notdir $(DEB)) --build-arg VERSION=$(VERSION) -t $(IMAGE) build/image && \
	new=$$(podman image inspect -f '{{.Id}}' $(IMAGE)) && \
	if [ -n "$$old" ] && [ "$$old" != "$$new" ]; then podman rmi "$$old" >/dev/null 2>&1 || true; fi

# The container tests: minutes, root and podman; not part of make test.
# python3-openpyxl: the pod test writes bench/'s agent-workload data (an
# Excel file among it) on the host before copying it into the pod.
PODMAN_PKGS := podman runc debootstrap catatonit containernetworking-plugins python3-openpyxl
# The image and pod tests run the escape suite inside the containers.
JAIL_HELPERS := $(BUILD)/helpers/jailrun $(BUILD)/helpers/dockerrun
## test-packages: test-deb, test-image and test-pod (podman; a few minutes, the first run downloads the Debian base)
test-packages: $(DEB) $(JAIL_HELPERS)
	scripts/setup.sh $(PODMAN_PKGS)
	test/packages/run.sh deb image pod
## test-deb: the package installed with dpkg in a clean Debian 12 container without network, driven by the MCP SDK as a user
test-deb: $(DEB)
	scripts/setup.sh $(PODMAN_PKGS)
	test/packages/run.sh deb
## test-image: make image on an offline Debian 12 base, then the image under podman's defaults through the MCP SDK
test-image: $(DEB) $(JAIL_HELPERS)
	scripts/setup.sh $(PODMAN_PKGS)
	test/packages/run.sh image
## test-pod: deploy/kubernetes/agent-pod.yaml under podman kube play: the server answers with the policy enforced
test-pod: $(DEB) $(JAIL_HELPERS)
	scripts/setup.sh $(PODMAN_PKGS)
	test/packages/run.sh pod
