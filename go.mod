module github.com/xlbproject/xlb

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/google/gopacket v1.1.19 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	github.com/spf13/pflag v1.1.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
