# The lab fleet's connection (test/fleet): community.docker.nsenter with
# pipelining. That plugin runs every command as `nsenter --target PID --
# sh -c CMD` and hands it its standard input (in_data), which is all
# pipelining needs; it only says has_pipelining = False. With pipelining
# a module runs in one nsenter and python3 (the module on stdin) instead
# of five commands (mkdir, tee the module, chmod, run it, rm). Only for
# the lab, whose inventory sets ansible_become: false (the plugin always
# runs as root; no privilege prompt).
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = '''
name: nsenter_pipelining
short_description: community.docker.nsenter with pipelining (test/fleet's lab)
description:
    - Enters the namespaces of a PID with nsenter, as community.docker.nsenter, and pipelines modules
      when pipelining is on (ANSIBLE_PIPELINING).
author: XLB
options:
    nsenter_pid:
        description:
            - PID to attach with using nsenter.
        type: int
        default: 1
        vars:
            - name: ansible_nsenter_pid
        env:
            - name: ANSIBLE_NSENTER_PID
'''

from ansible_collections.community.docker.plugins.connection.nsenter import Connection as NsenterConnection


class Connection(NsenterConnection):
    '''community.docker.nsenter with pipelining'''

    transport = 'nsenter_pipelining'
    has_pipelining = True
