package dataplane

// The BPF object is generated from bpf/xlb.c with clang through bpf2go and
// committed; `make generate` refreshes it and `make check-generated` fails
// when it is stale. Every struct and enum of bpf/layout.h that Go reads is
// listed with -type. The kernel headers' asm/ directory is the build
// machine's multiarch one (clang -print-multiarch; empty where the
// distribution has no multiarch layout). The second directive writes
// pkg/limits' constants from the object's enum xlb_limits (internal/genlimits);
// the third declares for pkg/dataplane/pins, which reads and migrates the
// pinned maps and cannot import this package, the types it reads: bpf2go's
// declarations of the same object, those of the map keys and values and
// the ones listed (internal/gentypes).
//
//go:generate sh -c "go tool bpf2go -cc clang -strip llvm-strip -target bpfel -type xlb_limits -type flow_key -type flow_value -type xlb_config -type snat_retired -type backend_set -type backend_ref -type xlb_state -type backend_stats -type port_map -type xlb_counter -type xlb_flow_flags -type xlb_dir -type xlb_cfg_flags -type xlb_reaped_reason -type xlb_pair_event -type close_event -type xlb_close_kind -type reap_req -type reap_batch -type xlb_reap_op -type xlb_reap_result -type snat_sync_req -type snat_sync_batch -type xlb_snat_sync_op -type xlb_snat_sync_result -type xlb_pin -type xlb_pin_meta -type nexthop -type nexthop_req -type nexthop_batch -type xlb_nexthop_op -type xlb_nexthop_result -type if_mac -type if_mac_slot -type xlb_hs_bound -type xlb_hs_cell -type xlb_backend_ts_state -type listen_key -type listen_value -type service -type xlb_service_state -type xlb_service_flags -type xlb_scheduler -type sched_head -type sched_chunk -type xlb_svc_counter xlb ../../bpf/xlb.c -- -I../../bpf -I/usr/include/$(clang -print-multiarch) -O2 -g -Wall -Werror -mcpu=v3"
//go:generate go run ../../internal/genlimits -obj xlb_bpfel.o -header ../../bpf/layout.h -o ../limits/layout_gen.go
//go:generate go run ../../internal/gentypes -obj xlb_bpfel.o -pkg pins -stem xlb -type xlb_limits -type xlb_pin -type xlb_pin_meta -type xlb_counter -type xlb_dir -type xlb_flow_flags -type nexthop -type backend_ref -type port_map -type snat_retired -type service -type xlb_service_state -type xlb_service_flags -type xlb_scheduler -type sched_head -type sched_chunk -type xlb_svc_counter -o pins/xlb_types_gen.go
