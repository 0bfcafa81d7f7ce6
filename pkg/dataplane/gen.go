package dataplane

// The BPF objects are generated from bpf/*.c with clang through bpf2go and
// committed; `make generate` refreshes them and CI fails when they are stale.
//
//go:generate go tool bpf2go -cc clang -strip llvm-strip -target bpfel -type flow_key -type flow_value -type xlb_config -type backend_set -type backend_ref -type xlb_state -type backend_stats -type port_map -type xlb_counter -type xlb_flow_flags -type xlb_dir -type xlb_cfg_flags -type xlb_reaped_reason -type xlb_pair_event -type close_event -type xlb_close_kind -type reap_req -type reap_batch -type xlb_reap_op -type xlb_reap_result xlb ../../bpf/xlb.c -- -I../../bpf -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror -mcpu=v3
//go:generate go tool bpf2go -cc clang -strip llvm-strip -target bpfel -no-global-types floor ../../bpf/floor.c -- -I../../bpf -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror -mcpu=v3
