"""Two kernels on one machine for live tests: network namespaces, each on a
veth pair whose root end a forwarder opens (net_af_packet, net_af_xdp).

    client ns  [c0] ==veth== [h0]  forwarder  [h1] ==veth== [s0]  server ns

The wire carries MTU-sized frames with full checksums, as a real link does:
TSO, GSO, GRO and checksum offload are off on all four ends, and IPv6 is off
so that router solicitations stay out of the counts.

`vxlan=True` builds the overlay variant: both namespaces send plain frames
out of their veth, and take in VXLAN (outer 192.0.2.2, VNI 1, port 4789: what
`grorx forward --encap vxlan` writes) through a VXLAN device that
decapsulates in the kernel. So every frame the forwarder sends is a tunnel
frame the far kernel must take apart, and every byte that arrives went
through GRO, encapsulation and software segmentation.
"""
import os
import subprocess

# Overlay constants: grorx's default VXLAN outer headers (VxlanConf::default).
VTEP_IP = "192.0.2.2"
VTEP_MAC = "02:00:00:00:00:0b"
VNI = 1


def sh(*args, check=True, ns=None, capture=False):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    r = subprocess.run(cmd, check=False, text=True,
                       stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout if capture else r.returncode


def offloads_off(dev, ns=None):
    # Each feature alone: a kernel without one of them still turns the rest off.
    for feat in ("tso", "gso", "gro", "tx", "rx-gro-list"):
        sh("ethtool", "-K", dev, feat, "off", ns=ns, check=False)


class Pair:
    """The two namespaces and their veths; `close()` removes everything."""

    def __init__(self, tag=None, vxlan=False, mtu=1500):
        self.tag = tag or f"g{os.getpid() % 100000}"
        self.cli, self.srv = f"{self.tag}c", f"{self.tag}s"
        self.h0, self.h1 = f"{self.tag}h0", f"{self.tag}h1"
        self.vxlan = vxlan
        # The overlay's tunnel frames are 50 B longer than the inner ones.
        self.link_mtu = mtu + 100 if vxlan else mtu
        self.mtu = mtu
        net = "10.78.0" if vxlan else "10.77.0"
        self.cli_ip, self.srv_ip = f"{net}.1", f"{net}.2"
        self.close()
        try:
            self._build()
        except Exception:
            self.close()
            raise

    def _build(self):
        sh("ip", "netns", "add", self.cli)
        sh("ip", "netns", "add", self.srv)
        for ns, root, inner, ip in ((self.cli, self.h0, "c0", self.cli_ip),
                                    (self.srv, self.h1, "s0", self.srv_ip)):
            sh("ip", "link", "add", root, "type", "veth", "peer", "name", inner, "netns", ns)
            for args in (("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"),
                         ("sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"),
                         ("sysctl", "-qw", "net.ipv4.conf.default.rp_filter=0"),
                         ("ip", "link", "set", "lo", "up"),
                         ("ip", "link", "set", inner, "mtu", self.link_mtu)):
                sh(*args, ns=ns)
            offloads_off(inner, ns=ns)
            sh("sysctl", "-qw", f"net.ipv6.conf.{root}.disable_ipv6=1", check=False)
            sh("ip", "link", "set", root, "mtu", self.link_mtu)
            offloads_off(root)
            sh("ip", "link", "set", root, "up")
            if not self.vxlan:
                sh("ip", "addr", "add", f"{ip}/24", "dev", inner, ns=ns)
                sh("ip", "link", "set", inner, "up", ns=ns)
        if self.vxlan:
            self._overlay()

    def _overlay(self):
        macs = {self.cli: "02:00:00:00:01:01", self.srv: "02:00:00:00:01:02"}
        ends = ((self.cli, "c0", self.cli_ip, self.srv, self.srv_ip),
                (self.srv, "s0", self.srv_ip, self.cli, self.cli_ip))
        for ns, dev, ip, peer, peer_ip in ends:
            # The underlay: every namespace is the VTEP grorx's outer headers name.
            sh("ip", "link", "set", dev, "address", VTEP_MAC, ns=ns)
            sh("ip", "addr", "add", f"{VTEP_IP}/24", "dev", dev, ns=ns)
            sh("ip", "link", "set", dev, "up", ns=ns)
            sh("ip", "link", "add", "vx0", "type", "vxlan", "id", VNI, "dstport", 4789,
               "local", VTEP_IP, "dev", dev, ns=ns)
            sh("ip", "link", "set", "vx0", "address", macs[ns], "mtu", self.mtu, ns=ns)
            offloads_off("vx0", ns=ns)
            sh("ip", "addr", "add", f"{ip}/24", "dev", "vx0", ns=ns)
            sh("ip", "link", "set", "vx0", "up", ns=ns)
            for d in ("vx0", dev):
                sh("sysctl", "-qw", f"net.ipv4.conf.{d}.rp_filter=0", ns=ns)
            # Out plain through the veth (grorx encapsulates), addressed to
            # the peer's VXLAN device, which takes the inner frame.
            sh("ip", "route", "add", f"{peer_ip}/32", "dev", dev, "src", ip, "mtu", self.mtu, ns=ns)
            sh("ip", "neigh", "replace", peer_ip, "lladdr", macs[peer], "dev", dev,
               "nud", "permanent", ns=ns)

    def ports(self, driver):
        """The forwarder's two --port specs for `driver` (af_packet or af_xdp)."""
        return [f"net_{driver}{i},iface={dev}" for i, dev in enumerate((self.h0, self.h1))]

    def retransmits(self):
        """TCP segments retransmitted by both kernels so far."""
        total = 0
        for ns in (self.cli, self.srv):
            lines = sh("cat", "/proc/net/snmp", ns=ns, capture=True).splitlines()
            tcp = [ln.split() for ln in lines if ln.startswith("Tcp:")]
            total += int(tcp[1][tcp[0].index("RetransSegs")])
        return total

    def close(self):
        for dev in (self.h0, self.h1):
            sh("ip", "link", "del", dev, check=False)
        for ns in (self.cli, self.srv):
            sh("ip", "netns", "del", ns, check=False)
