#!/usr/bin/env python3
"""Open one TCP connection to an XLB service through one particular host.

The service address (VIP) is shared by the fleet and the upstream spreads
it over the hosts, so a plain connection to it may land anywhere; and a
host being upgraded is drained, so none would land on it. This probe
routes its own socket, and nothing else, via the host's own address:

  ip route replace VIP/32 via HOST dev DEV table T
  ip rule add fwmark M lookup T priority P
  socket with SO_MARK=M -> connect VIP:PORT [send payload, expect reply]

then removes the rule and the route again. Run it as root on a Linux host
that reaches HOST on-link (the upstream router or a host on the same
segment), with python3 and iproute2. Prints one line and exits 0 on
success; exits 1 with the reason otherwise.
"""

import argparse
import ipaddress
import json
import socket
import subprocess
import sys
import time

SO_MARK = getattr(socket, "SO_MARK", 36)
RULE_PRIORITY = 1000


def ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--service", required=True, help="VIP:PORT")
    p.add_argument("--via", required=True, help="the XLB host's own address")
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--payload", default="", help="bytes to send after connecting")
    p.add_argument("--expect", default="", help="text the reply must contain")
    a = p.parse_args()

    host, _, port = a.service.rpartition(":")
    vip = ipaddress.IPv4Address(host)
    via = ipaddress.IPv4Address(a.via)
    port = int(port)
    # One table and mark per XLB host, so probes of different hosts can
    # run at the same time on one probe host.
    table = mark = 0x584C0000 | (int(via) & 0xFFFF)

    route = json.loads(ip("-j", "route", "get", str(via)).stdout)[0]
    if "gateway" in route:
        print("xlb-probe: %s is not on-link here (route via %s); run the probe on a host of its segment"
              % (via, route["gateway"]), file=sys.stderr)
        return 1
    dev = route["dev"]

    ip("rule", "del", "fwmark", hex(mark), "lookup", str(table), check=False)
    ip("route", "replace", "%s/32" % vip, "via", str(via), "dev", dev, "table", str(table))
    try:
        ip("rule", "add", "fwmark", hex(mark), "lookup", str(table), "priority", str(RULE_PRIORITY))
        try:
            return probe(vip, port, via, dev, mark, a)
        finally:
            ip("rule", "del", "fwmark", hex(mark), "lookup", str(table), check=False)
    finally:
        ip("route", "del", "%s/32" % vip, "table", str(table), check=False)


def probe(vip, port, via, dev, mark, a):
    start = time.monotonic()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, SO_MARK, mark)
        s.settimeout(a.timeout)
        try:
            s.connect((str(vip), port))
        except OSError as e:
            print("xlb-probe: connect %s:%d via %s (%s): %s" % (vip, port, via, dev, e), file=sys.stderr)
            return 1
        local = "%s:%d" % s.getsockname()
        reply = b""
        if a.payload:
            s.sendall(a.payload.encode().decode("unicode_escape").encode("latin-1"))
        if a.expect:
            want = a.expect.encode()
            deadline = start + a.timeout
            while want not in reply:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                s.settimeout(left)
                try:
                    chunk = s.recv(4096)
                except OSError as e:
                    print("xlb-probe: %s:%d via %s: reading the reply: %s (got %r)" % (vip, port, via, e, reply),
                          file=sys.stderr)
                    return 1
                if not chunk:
                    break
                reply += chunk
            if want not in reply:
                print("xlb-probe: %s:%d via %s: reply %r lacks %r" % (vip, port, via, reply, want), file=sys.stderr)
                return 1
        ms = (time.monotonic() - start) * 1000
        print("xlb-probe: connected %s -> %s:%d via %s (%s) in %.1f ms%s" % (
            local, vip, port, via, dev, ms, ", reply matched %r" % a.expect if a.expect else ""))
        return 0
    finally:
        s.close()


if __name__ == "__main__":
    sys.exit(main())
