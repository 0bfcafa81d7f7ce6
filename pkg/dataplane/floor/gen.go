package floor

// The floor's BPF object is generated from bpf/floor.c like the XLB
// program's (pkg/dataplane/gen.go), in its own package so that the daemon
// binary does not carry it.
//
//go:generate sh -c "go tool bpf2go -cc clang -strip llvm-strip -target bpfel -no-global-types -type floor_recipe floor ../../../bpf/floor.c -- -I../../../bpf -I/usr/include/$(clang -print-multiarch) -O2 -g -Wall -Werror -mcpu=v3"

// The floor balancer (bpf/floor_lb.c, balancer.go) is generated the same way.
//
//go:generate sh -c "go tool bpf2go -cc clang -strip llvm-strip -target bpfel -no-global-types -type floor_lb_config -type floor_lb_backend -type floor_lb_limits floorLB ../../../bpf/floor_lb.c -- -I../../../bpf -I/usr/include/$(clang -print-multiarch) -O2 -g -Wall -Werror -mcpu=v3"
