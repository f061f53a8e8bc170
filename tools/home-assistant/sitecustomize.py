"""The network guard of BeaconBridge's Home Assistant test (Tests/IntegrationTests/HomeAssistantTests.swift).

Home Assistant's Python imports this at start-up when the test puts this directory on
PYTHONPATH. With BEACONBRIDGE_HA_NETLOG set, a Python audit hook stops every attempt to
leave loopback and writes one line for it to that file:

- a TCP connect, or a sendto, to an address that is not 127.0.0.0/8 or ::1;
- a bind to such an address with a port (listening beyond loopback; a client's bind to
  port 0, as paho-mqtt does before it connects, only picks an ephemeral port);
- a name resolved other than localhost (a DNS query leaves the machine);
- a UDP connect beyond loopback, written as "udp-probe": it sends nothing (Home Assistant's
  network integration connects a UDP socket to 8.8.8.8 and 224.0.0.251 only to read the
  source address the kernel picks), and being stopped, the socket can send nothing later.

Stopped means the call raises OSError (ENETUNREACH; socket.gaierror for names), as on a
machine with no route out. The test fails on every line but the udp-probe ones. Unix,
netlink and other local sockets are not networks and are let through unrecorded.
"""

import errno
import ipaddress
import os
import socket
import sys

_LOG = os.environ.get("BEACONBRIDGE_HA_NETLOG")
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def _beyond_loopback(host):
    """Whether `host` (a name or an address) is somewhere other than this machine's loopback."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False  # not an IP socket's address (netlink, Bluetooth...): not a network
    if host in _LOCAL_NAMES:
        return False
    try:
        return not ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return True  # a name other than localhost: resolving it leaves the machine


def _stop(kind, what):
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(f"{kind} {what!r}\n")
    if kind == "socket.getaddrinfo":
        raise socket.gaierror(socket.EAI_NONAME, "stopped by BeaconBridge's test: not on loopback")
    raise OSError(errno.ENETUNREACH, "stopped by BeaconBridge's test: not on loopback")


def _hook(event, args):
    if event in ("socket.connect", "socket.sendto", "socket.bind"):
        sock, address = args[0], args[1]
        if event == "socket.bind" and isinstance(address, tuple) and len(address) > 1 and address[1] == 0:
            return
        if isinstance(address, tuple) and address and _beyond_loopback(address[0]):
            udp = event == "socket.connect" and getattr(sock, "type", None) == socket.SOCK_DGRAM
            _stop("udp-probe" if udp else event, address)
    elif event == "socket.getaddrinfo":
        host = args[0]
        if host is not None and _beyond_loopback(host):
            _stop(event, host)


if _LOG:
    sys.addaudithook(_hook)
