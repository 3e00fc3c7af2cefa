"""Which address a multi-node run listens on, and which network interface carries it.

A single-machine run listens on 127.0.0.1 only. Across machines the other nodes must reach
the rendezvous stores and gloo's pairs, so a node listens on the address the user names
(`--bind-addr`), or on the `--rdzv-endpoint` host when that is an address of this machine
(the node that hosts the rendezvous); never on every interface when either is known. The
address must belong to this machine, checked before anything starts, and gloo is pointed at
its interface (GLOO_SOCKET_IFNAME).

Interfaces are read from the kernel: IPv4 addresses with the SIOCGIFADDR ioctl, IPv6 ones from
/proc/net/if_inet6, and secondary IPv4 addresses from `ip -o addr` where `ip` is installed.
Linux only, like the engine's launch.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import shutil
import socket
import struct
import subprocess
from pathlib import Path

SIOCGIFADDR = 0x8915


def _ipv4_by_ioctl() -> dict[str, str]:
    """{address: interface} of every interface's primary IPv4 address."""
    found = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):  # an interface without an IPv4 address
                req = struct.pack("256s", name.encode()[:15])
                raw = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, req)
                found[socket.inet_ntoa(raw[20:24])] = name
    return found


def _ipv6_from_proc() -> dict[str, str]:
    """{address: interface} from /proc/net/if_inet6 (hex address, index, ..., name)."""
    found = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            f = line.split()
            if len(f) >= 6 and len(f[0]) == 32:
                found[str(ipaddress.IPv6Address(bytes.fromhex(f[0])))] = f[5]
    return found


def _from_ip_command() -> dict[str, str]:
    """{address: interface} from `ip -o addr` (secondary addresses too), if `ip` exists."""
    ip = shutil.which("ip")
    if not ip:
        return {}
    try:
        text = subprocess.run([ip, "-o", "addr"], capture_output=True, text=True, timeout=5,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in text.splitlines():  # "4: eth0    inet 192.0.2.2/24 brd ... scope global eth0"
        f = line.split()
        if len(f) >= 4 and f[2] in ("inet", "inet6"):
            with contextlib.suppress(ValueError):
                found[str(ipaddress.ip_address(f[3].split("/")[0]))] = f[1].split("@")[0]
    return found


def local_addresses() -> dict[str, str]:
    """Every address of this machine -> the interface that carries it."""
    return {**_from_ip_command(), **_ipv6_from_proc(), **_ipv4_by_ioctl()}


def interface_of(address: str) -> str | None:
    """The interface that carries `address` (an IP literal), or None if it is not local."""
    try:
        key = str(ipaddress.ip_address(address.strip("[]")))
    except ValueError:
        return None
    return local_addresses().get(key)


def bind_problem(address: str) -> str | None:
    """Why `address` cannot be listened on here (one line), or None."""
    try:
        ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return f"--bind-addr: expected an IP address of this machine, got {address!r}"
    if ipaddress.ip_address(address.strip("[]")).is_unspecified:
        return f"--bind-addr: {address} means every interface; name one address of this machine"
    if interface_of(address) is None:
        return f"--bind-addr: {address} is not an address of this machine"
    return None


def endpoint_host(endpoint: str) -> str:
    """HOST of HOST:PORT ("[::1]:29400" -> "::1")."""
    return endpoint.rpartition(":")[0].strip("[]")


def chosen_bind_addr(bind_addr: str, nnodes: int, rdzv_endpoint: str) -> str:
    """The address a multi-node run's stores and gloo listen on: --bind-addr if given, else
    the rendezvous host if it is an address of this machine, else "" (torch's own choice:
    nothing known to bind to). Single-machine runs use loopback (heterps_exec.launch)."""
    if nnodes == 1:
        return ""
    if bind_addr:
        return bind_addr.strip("[]")
    host = endpoint_host(rdzv_endpoint) if rdzv_endpoint else ""
    return host if host and interface_of(host) else ""
