#!/usr/bin/env python3
"""Drain or return one member of a Linux resilient nexthop group.

Used by ansible/hooks/linux_nexthop_group.yml on the router. Prints one
JSON object: {"changed": bool, "message": str, "group": [...], ...}.

  drain    weight 1 (wants no bucket) and the short drain idle timer; wait
           until the member holds no bucket (the kernel moves a bucket only
           after it was idle for the timer), at most --drain-timeout
           seconds; then remove the member (its remaining buckets, if any,
           move at once) and restore --idle-timer.
  undrain  add the member back with --weight and --idle-timer (the other
           members' buckets move to it only after being idle that long).

Both are idempotent. The last member is never drained. Concurrent calls
for one group are serialised with a lock file.
"""

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time

MAX_WEIGHT = 255  # iproute2 accepts 1..256


def ip(*args):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("ip %s: %s" % (" ".join(args), (r.stderr or r.stdout).strip()))
    return r.stdout


def read_group(gid):
    g = json.loads(ip("-j", "nexthop", "show", "id", str(gid)))[0]
    if g.get("type") != "resilient":
        raise RuntimeError("nexthop %d is not a resilient group" % gid)
    members = [(m["id"], m.get("weight", 1)) for m in g["group"]]
    return members, g["resilient_args"]


def buckets_of(gid, nhid):
    out = ip("-j", "nexthop", "bucket", "show", "id", str(gid), "nhid", str(nhid))
    return len(json.loads(out or "[]"))


def replace(gid, members, idle_timer, unbalanced_timer):
    spec = "/".join("%d,%d" % m for m in members)
    ip("nexthop", "replace", "id", str(gid), "group", spec, "type", "resilient",
       "idle_timer", str(idle_timer), "unbalanced_timer", str(unbalanced_timer))


def describe(members):
    return " ".join("%d(w%d)" % m for m in members)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=["drain", "undrain"])
    p.add_argument("--group", type=int, required=True)
    p.add_argument("--nexthop", type=int, required=True)
    p.add_argument("--weight", type=int, default=100)
    p.add_argument("--idle-timer", type=int, default=15)
    p.add_argument("--drain-idle-timer", type=int, default=2)
    p.add_argument("--drain-timeout", type=float, default=60)
    a = p.parse_args()

    os.makedirs("/run/lock", exist_ok=True)
    with open("/run/lock/xlb-nexthop-group-%d.lock" % a.group, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = drain(a) if a.action == "drain" else undrain(a)
    members, args = read_group(a.group)
    result["group"] = describe(members)
    result["idle_timer"] = args["idle_timer"]
    print(json.dumps(result))
    return 0


def drain(a):
    members, args = read_group(a.group)
    unb = args.get("unbalanced_timer", 0)
    ids = [m[0] for m in members]
    if a.nexthop not in ids:
        return {"changed": False, "message": "nexthop %d is not in group %d (already drained)" % (a.nexthop, a.group)}
    if len(ids) == 1:
        raise RuntimeError("nexthop %d is the last member of group %d: draining it would leave the service address "
                           "without a next hop" % (a.nexthop, a.group))
    before = buckets_of(a.group, a.nexthop)
    start = time.monotonic()
    # The member keeps weight 1 (the minimum) and the others are scaled to
    # MAX_WEIGHT keeping their ratios, so that its share rounds to no
    # bucket: buckets * 1 / (1 + sum of the others) < 1/2.
    top = max(w for i, w in members if i != a.nexthop)
    draining = [(i, 1 if i == a.nexthop else max(1, round(w * MAX_WEIGHT / top))) for i, w in members]
    total = sum(w for _, w in draining)
    if args["buckets"] * 2 >= total:
        raise RuntimeError("group %d has %d buckets: too many for a weight-1 member to want none (total weight %d); "
                           "use fewer buckets" % (a.group, args["buckets"], total))
    replace(a.group, draining, a.drain_idle_timer, unb)
    left = buckets_of(a.group, a.nexthop)
    while left > 0 and time.monotonic() - start < a.drain_timeout:
        time.sleep(0.2)
        left = buckets_of(a.group, a.nexthop)
    waited = time.monotonic() - start
    rest = [(i, w) for i, w in members if i != a.nexthop]
    replace(a.group, rest, a.idle_timer, unb)
    if left == 0:
        msg = ("drained nexthop %d from group %d: its %d buckets moved as they went idle (idle timer %d s) "
               "in %.1f s; removed it" % (a.nexthop, a.group, before, a.drain_idle_timer, waited))
    else:
        msg = ("nexthop %d still held %d of its %d buckets after %.0f s (busy flows); removed it anyway: "
               "those flows moved to other members" % (a.nexthop, left, before, waited))
    return {"changed": True, "message": msg, "buckets_before": before, "buckets_forced": left,
            "seconds": round(waited, 1)}


def undrain(a):
    members, args = read_group(a.group)
    unb = args.get("unbalanced_timer", 0)
    current = dict(members)
    if current.get(a.nexthop) == a.weight and args["idle_timer"] == a.idle_timer:
        return {"changed": False, "message": "nexthop %d is in group %d with weight %d" % (a.nexthop, a.group, a.weight)}
    if a.nexthop in current:
        wanted = [(i, a.weight if i == a.nexthop else w) for i, w in members]
    else:
        wanted = members + [(a.nexthop, a.weight)]
    replace(a.group, wanted, a.idle_timer, unb)
    return {"changed": True, "message": "nexthop %d is back in group %d with weight %d; the others' buckets move "
            "to it once idle for %d s" % (a.nexthop, a.group, a.weight, a.idle_timer)}


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, ValueError, KeyError, IndexError) as e:
        print("nexthop_group: %s" % e, file=sys.stderr)
        sys.exit(1)
