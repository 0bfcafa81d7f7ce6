// Package hostlab boots a Debian host with systemd as PID 1 in a
// container, so that XLB's packages and its systemd unit are tested on a
// real service manager, with XDP attached to a lab interface.
//
// The root filesystem is a debootstrap of Debian bookworm (minbase plus
// systemd, dbus, iproute2 and rpm) from the machine's own apt mirror,
// cached under HOSTLAB_CACHE (default /var/cache/xlb-hostlab) and rebuilt
// when missing (EnsureRootfs). A container boots it with systemd-nspawn
// --boot --keep-unit --register=no on an overlay (--overlay=ROOT:UPPER:/),
// so the cache stays pristine; UPPER is removed afterwards. The container
// joins a network namespace the caller made, normally the XLB host of a
// test/lab topology (Options.NetnsPath = lab.XLB.Path), so XLB inside
// attaches XDP to the lab's veth and balances the lab client's traffic.
// Commands run inside with nsenter --target PID1 --all.
//
// What XLB needs from the container, found by removing each piece:
//
//   - capabilities CAP_NET_ADMIN, CAP_BPF (--capability=); not CAP_PERFMON,
//     since XLB loads XDP programs only;
//     nspawn's default set has none of them when the network namespace
//     comes from --network-namespace-path;
//   - the bpf system call (--system-call-filter=bpf); nspawn's seccomp
//     filter answers it with EPERM otherwise;
//   - a writable /proc/sys/net (SYSTEMD_NSPAWN_API_VFS_WRITABLE=network);
//     the rest of /proc/sys stays read-only;
//   - a bpffs at /sys/fs/bpf, where XLB pins its maps, XDP links and
//     metadata (state_dir /sys/fs/bpf/xlb) so that they outlive the process:
//     a hot upgrade (systemctl reload) and a crash keep every connection.
//     Each container gets a fresh bpffs of its own, mounted on the host in
//     its run directory and bound with --bind=DIR:/sys/fs/bpf, so parallel
//     containers (the fleet's three hosts, parallel tests) never see each
//     other's pins; cleanup unmounts it. Binding the host's /sys/fs/bpf
//     instead would share one set of pins between containers, and bind
//     the sysfs directory, not a bpffs, on a host where none is mounted
//     there. The unit's ExecStartPre (xlb mount-bpffs) finds it mounted.
//
// CAP_SYS_RESOURCE is not needed: BPF memory is charged to the memory
// cgroup.
//
// Each container's systemd-nspawn runs in cgroups of its own
// (/sys/fs/cgroup/{systemd,unified}/xlb-hostlab-NAME-*), so the payload and
// supervisor groups nspawn leaves behind are removed with them and two
// containers never share them. Close powers the container off (SIGKILL of
// its init after 30 s), then removes the cgroups, unmounts the bpffs and
// removes the upper layer; CleanupStale does the same for what a crashed
// run left.
package hostlab
