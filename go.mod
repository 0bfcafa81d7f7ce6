module github.com/xlbproject/xlb

go 1.26.8

require (
	// cilium/ebpf is pinned to one version, raised only on purpose: hot upgrades
	// hand pinned maps and XDP links from one build to the next, and the attach
	// type it gives programs, its pin compatibility check and its map
	// replacement rules are part of that contract (DESIGN §6).
	github.com/cilium/ebpf v0.22.0
	github.com/coreos/go-systemd/v22 v22.6.0
	github.com/fsnotify/fsnotify v1.10.1
	github.com/google/gopacket v1.1.19
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.72.0
	github.com/prometheus/procfs v0.22.0
	github.com/sirupsen/logrus v1.10.2
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.50.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
