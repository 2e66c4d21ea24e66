"""A private Anyone network on 127.0.0.1, for tests and benchmarks.

Three directory authorities, two relays and two exits (which accept only
127.0.0.0/8), plus one client with a SOCKS port. Other ``anon`` processes (our
supervisor, a hidden service) join it with ``network_options()``. The option set
follows chutney's templates; measured facts are in reference/ANYONE.md.

Bring-up runs in two phases: the relays first, then the client once the
consensus lists every relay (a client that starts on a one-relay consensus
stalls for 10-25 s). Every wait is bounded; a failed bring-up is retried once in
a fresh directory, and the logs of both tries are kept and named in the error.
Only the processes started here are stopped, by PID.

An ``AnyoneService`` whose data directory holds ``anyone/test-network.torrc``
(``write_test_network``) joins that private network instead of the public one.
That is how a test tells a ComfyUI with the pack, started as its own process,
which network to use; ``load_test_network`` accepts nothing but the options that
choose a network, and only when they declare ``TestingTorNetwork 1``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from .errors import PrivateNetworkError
from .process import Options, free_ports, render_torrc

CONTACT = "courier-privnet@localhost"
TEST_NETWORK_FILE = "test-network.torrc"
# what network_options() writes: the options that choose a network, nothing else
NETWORK_KEYS = ("TestingTorNetwork", "UseMicrodescriptors", "PathsNeededToBuildCircuits",
                "TestingDirAuthVoteGuard", "TestingDirAuthVoteExit", "TestingDirAuthVoteHSDir", "DirAuthority")


def load_test_network(path: Path) -> Options:
    """The torrc lines of ``path`` (a ``write_test_network`` file); [] when there is no such file.

    Raises PrivateNetworkError for anything but the options of NETWORK_KEYS, or when the
    file does not declare ``TestingTorNetwork 1``: it can only ever point anon at a test network.
    """
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    options: Options = []
    for number, raw_line in enumerate(text.splitlines(), 1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        if key not in NETWORK_KEYS:
            raise PrivateNetworkError(f"{path}, line {number}: {key!r} is not a test-network option "
                                      f"(allowed: {', '.join(NETWORK_KEYS)})")
        options.append((key, value.strip()))
    if ("TestingTorNetwork", "1") not in options:
        raise PrivateNetworkError(f"{path} does not declare TestingTorNetwork 1: not a private test network")
    return options


@dataclasses.dataclass
class Node:
    name: str
    role: str  # authority | relay | exit | client
    dir: Path
    control_port: int
    or_port: int = 0
    dir_port: int = 0
    socks_port: int = 0
    fingerprint: str = ""
    v3ident: str = ""
    process: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return self.dir / "notice.log"

    @property
    def torrc(self) -> Path:
        return self.dir / "torrc"


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class PrivateNetwork:
    """``await start()`` brings it up (or raises), ``await stop()`` ends every node."""

    def __init__(self, anon: Path, workdir: Path, *, relays: int = 2, exits: int = 2,
                 attempt_timeout: float = 75.0):
        self.anon = Path(anon)
        self.gencert = self.anon.with_name("anon-gencert")
        self.workdir = Path(workdir)
        self.relays = relays
        self.exits = exits
        self.attempt_timeout = attempt_timeout
        self.nodes: list[Node] = []
        self.phases: dict[str, float] = {}  # seconds per bring-up phase, for benchmarks

    @property
    def client(self) -> Node:
        return next(n for n in self.nodes if n.role == "client")

    @property
    def socks_url(self) -> str:
        return f"socks5://127.0.0.1:{self.client.socks_port}"

    def network_options(self) -> Options:
        """What another anon needs to join this network (as a client or hidden service)."""
        authorities = [n for n in self.nodes if n.role == "authority"]
        exits = ",".join(n.fingerprint for n in self.nodes if n.role == "exit")
        return [
            ("TestingTorNetwork", "1"),
            # Microdescriptor exit-policy summaries ignore 127.0.0.0/8, so a client would see
            # no exit for loopback targets (chutney #11264); full descriptors carry the policy.
            ("UseMicrodescriptors", "0"),
            ("PathsNeededToBuildCircuits", "0.67"),
            ("TestingDirAuthVoteGuard", "*"),
            ("TestingDirAuthVoteExit", exits),
            ("TestingDirAuthVoteHSDir", ",".join(a.fingerprint for a in authorities)),
            *[("DirAuthority", (f"{a.name} orport={a.or_port} no-v2 v3ident={a.v3ident} "
                                f"127.0.0.1:{a.dir_port} {a.fingerprint}")) for a in authorities],
        ]

    def write_test_network(self, data_dir: Path) -> Path:
        """Make the AnyoneService of Courier data directory ``data_dir`` join this network."""
        path = Path(data_dir) / "anyone" / TEST_NETWORK_FILE
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text("# Written by anyone/privnet.py: join a private test network on 127.0.0.1.\n"
                        + render_torrc(self.network_options()))
        return path

    async def start(self) -> None:
        """Bring the network up; retried once; raises PrivateNetworkError with log paths."""
        errors = []
        for attempt in (1, 2):
            try:
                await asyncio.wait_for(self._bring_up(self.workdir / f"try{attempt}"), self.attempt_timeout)
                return
            except (asyncio.TimeoutError, PrivateNetworkError, OSError, subprocess.SubprocessError) as exc:
                reason = str(exc) or f"not ready after {self.attempt_timeout:.0f} s"
                errors.append(f"try {attempt}: {reason}\n" + self._describe())
                await self.stop()
        raise PrivateNetworkError("private Anyone network did not come up\n" + "\n".join(errors))

    async def stop(self) -> None:
        """SIGTERM every node we started, SIGKILL what is left after 3 s."""
        running = [n.process for n in self.nodes if n.process and n.process.poll() is None]
        for proc in running:
            proc.terminate()
        deadline = time.monotonic() + 3
        while any(p.poll() is None for p in running) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for proc in running:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def _describe(self) -> str:
        parts = []
        for n in self.nodes:
            rc = n.process.poll() if n.process else "not started"
            tail = log_tail(n.log, 5) if n.log.exists() else log_tail(n.dir / "stderr.log", 5)
            parts.append(f"  {n.name} (rc={rc}) log: {n.log}\n    " + tail.replace("\n", "\n    "))
        return "\n".join(parts)

    async def _bring_up(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        roles = ["authority"] * 3 + ["relay"] * self.relays + ["exit"] * self.exits + ["client"]
        ports = iter(free_ports(len(roles) * 3))
        self.nodes = []
        counts: dict[str, int] = {}
        for role in roles:
            index = counts[role] = counts.get(role, -1) + 1
            name = f"{role[:4]}{index}"
            node_dir = root / name
            node_dir.mkdir(mode=0o700)
            node = Node(name, role, node_dir, control_port=next(ports))
            if role == "client":
                node.socks_port = next(ports)
            else:
                node.or_port = next(ports)
            if role == "authority":
                node.dir_port = next(ports)
            self.nodes.append(node)
        self.phases = {}
        began = time.monotonic()

        def phase(name: str) -> None:
            nonlocal began
            self.phases[name] = time.monotonic() - began
            began = time.monotonic()

        await asyncio.gather(*(self._make_authority_keys(n) for n in self.nodes if n.role == "authority"),
                             *(self._read_fingerprint(n) for n in self.nodes if n.role in ("authority", "exit")))
        phase("keys")
        for node in self.nodes:
            node.torrc.write_text(render_torrc(self._options(node)))
        for node in self.nodes:
            if node.role != "client":
                self._launch(node)
        await self._wait(self._consensus_complete, "consensus listing every relay")
        phase("consensus")
        self._launch(self.client)
        await self._wait(lambda: "Bootstrapped 100%" in self.client.log.read_text(errors="replace"),
                         "client bootstrap 100%")
        phase("client_bootstrap")

    async def _wait(self, ready, what: str) -> None:
        while True:
            for n in self.nodes:
                if n.process and n.process.poll() is not None:
                    raise PrivateNetworkError(f"{n.name} exited with rc {n.process.returncode} "
                                              f"while waiting for {what}")
            try:
                if await asyncio.to_thread(ready):
                    return
            except OSError:
                pass  # not listening / no log yet
            await asyncio.sleep(0.25)

    def _consensus_complete(self) -> bool:
        relays = sum(1 for n in self.nodes if n.role != "client")
        for node in self.nodes:
            if node.role == "authority":
                url = f"http://127.0.0.1:{node.dir_port}/tor/status-vote/current/consensus"
                try:
                    with urllib.request.urlopen(url, timeout=2) as reply:
                        text = reply.read().decode(errors="replace")
                except OSError:
                    return False
                if sum(1 for line in text.splitlines() if line.startswith("r ")) < relays:
                    return False
        return True

    async def _make_authority_keys(self, node: Node) -> None:
        keys = node.dir / "keys"
        keys.mkdir(mode=0o700, exist_ok=True)
        await asyncio.to_thread(
            subprocess.run,
            [str(self.gencert), "--create-identity-key", "--passphrase-fd", "0", "-m", "12",
             "-a", f"127.0.0.1:{node.dir_port}", "-i", str(keys / "authority_identity_key"),
             "-s", str(keys / "authority_signing_key"), "-c", str(keys / "authority_certificate")],
            input=b"", capture_output=True, timeout=30, check=True)
        for line in (keys / "authority_certificate").read_text().splitlines():
            if line.startswith("fingerprint "):
                node.v3ident = line.split()[1]

    async def _read_fingerprint(self, node: Node) -> None:
        # --list-fingerprint aborts ("free(): invalid size") when TestingTorNetwork is
        # set, so it runs on a minimal torrc; the fingerprint depends only on the keys.
        torrc = node.dir / "fingerprint.torrc"
        torrc.write_text(render_torrc([
            ("DataDirectory", str(node.dir)), ("AgreeToTerms", "1"), ("DisableNetwork", "1"),
            ("Nickname", node.name), ("ORPort", f"127.0.0.1:{node.or_port}"), ("Address", "127.0.0.1"),
            ("ContactInfo", CONTACT), ("Log", "err stderr")]))
        out = await asyncio.to_thread(subprocess.run, [str(self.anon), "-f", str(torrc), "--list-fingerprint"],
                                      capture_output=True, text=True, timeout=30, check=True)
        node.fingerprint = "".join(out.stdout.strip().splitlines()[-1].split()[1:])

    def _options(self, node: Node) -> Options:
        opts: Options = [
            ("AgreeToTerms", "1"),
            ("DataDirectory", str(node.dir)),
            ("Nickname", node.name),
            ("ControlPort", f"127.0.0.1:{node.control_port}"),
            ("CookieAuthentication", "1"),
            ("SafeLogging", "0"),
            ("ShutdownWaitLength", "0"),
            ("Log", f"notice file {node.log}"),
            # the node exits by itself if this (test) process dies without teardown
            ("__OwningControllerProcess", str(os.getpid())),
            *self.network_options(),
        ]
        if node.role == "client":
            return opts + [("SocksPort", f"127.0.0.1:{node.socks_port}")]
        opts += [
            ("Address", "127.0.0.1"),
            ("ORPort", f"127.0.0.1:{node.or_port}"),
            ("SocksPort", "0"),
            ("AssumeReachable", "1"),
            ("ContactInfo", CONTACT),
            ("ServerDNSResolvConfFile", "/dev/null"),
            ("ServerDNSDetectHijacking", "0"),
            ("ServerDNSTestAddresses", ""),
        ]
        if node.role == "authority":
            opts += [
                ("AuthoritativeDirectory", "1"),
                ("V3AuthoritativeDirectory", "1"),
                ("DirPort", f"127.0.0.1:{node.dir_port}"),
                ("TestingV3AuthInitialVotingInterval", "5"),
                ("V3AuthVotingInterval", "10"),
                ("TestingV3AuthInitialVoteDelay", "2"),
                ("V3AuthVoteDelay", "2"),
                ("TestingV3AuthInitialDistDelay", "2"),
                ("V3AuthDistDelay", "2"),
                ("ExitRelay", "0"),
            ]
        elif node.role == "exit":
            opts += [
                ("DirCache", "0"),
                ("ExitRelay", "1"),
                # In a young network an exit's consensus may not list the relay before it yet;
                # it would then refuse the stream (END reason MISC) and the client's retries
                # end on "doomed" exits until its SocksTimeout (120 s).
                ("RefuseUnknownExits", "0"),
                ("ExitPolicyRejectPrivate", "0"),
                ("ExitPolicy", "accept 127.0.0.0/8:*"),
                ("ExitPolicy", "reject *:*"),
            ]
        else:
            opts += [("DirCache", "0"), ("ExitRelay", "0")]
        return opts

    def _launch(self, node: Node) -> None:
        with open(node.dir / "stderr.log", "wb") as stderr:
            node.process = subprocess.Popen([str(self.anon), "-f", str(node.torrc)],
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
