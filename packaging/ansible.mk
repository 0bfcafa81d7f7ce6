# Ansible role and playbooks (ansible/) and the lab fleet that runs them
# (test/fleet). Included by the top-level Makefile; `make test` runs both
# through `go test ./...`.
#
#   make ansible-lint   ansible-lint (production profile) + --syntax-check of every playbook
#   make test-fleet     the lab fleet: site.yml, rolling-upgrade.yml under traffic, a failing host

# Debian's ansible-core 2.14 and ansible-lint 6.13; "ansible" brings the
# collections, among them community.docker (its nsenter connection plugin
# reaches the lab's booted containers).
APT_PACKAGES += ansible-core ansible-lint ansible

ANSIBLE_DIR := ansible

.PHONY: ansible-lint test-fleet

ansible-lint: deps
	cd $(ANSIBLE_DIR) && ANSIBLE_CONFIG=$(CURDIR)/$(ANSIBLE_DIR)/ansible.cfg ansible-lint --offline --profile production
	cd $(ANSIBLE_DIR) && for p in playbooks/*.yml; do \
		ANSIBLE_CONFIG=$(CURDIR)/$(ANSIBLE_DIR)/ansible.cfg ansible-playbook --syntax-check $$p || exit 1; \
	done

# Root; builds three package versions and boots three containers (the
# first run also debootstraps the root filesystem into HOSTLAB_CACHE).
test-fleet: deps
	$(GO) test -count=1 -timeout 30m -v ./test/fleet/
