package hostnet

// FIBLookupSysctl is the sysctl the data path needs set to "1":
// bpf_fib_lookup looks the backend-facing route up as if the packet entered
// from the loopback device (a locally originated lookup), and the kernel
// refuses lookups on a device without forwarding. Forwarding on lo forwards
// nothing by itself: packets only enter lo when this host sends them to
// itself. The instance sets it through its Journal.
const FIBLookupSysctl = "/proc/sys/net/ipv4/conf/lo/forwarding"

// reservedPortsSysctl is net.ipv4.ip_local_reserved_ports: the ports host
// sockets never pick as ephemeral ports (ReservePorts).
const reservedPortsSysctl = "/proc/sys/net/ipv4/ip_local_reserved_ports"
