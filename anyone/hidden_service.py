"""The ComfyUI server as a persistent Anyone hidden service, with client authorization.

Keys live in ``<data_dir>/anyone/hs``, so the ``.anon`` address survives restarts.
We serve ``.anon`` addresses: the pinned anon 0.4.9.x knows no other onion suffix
(see transport.py). anon forwards the service to the gateway (gateway.py), not
to ComfyUI itself.

Client authorization (v3, on unless COURIER_ANYONE_CLIENT_AUTH=0): each
authorized client has an x25519 key pair. The server keeps the public half in
``<data_dir>/anyone/clients/<name>.auth``; on start we copy those into
``hs/authorized_clients/`` when the setting is on and empty that folder when it
is off, because anon enforces whatever it finds there -- and publishes an *open*
service when the folder is empty. So the first start provisions: anon creates
the service keys once with the network disabled, and one client, ``bot-host``,
is authorized, its secret line written into this host's own ClientOnionAuthDir
(``client_auth/``) so the bot here can reach the service; with the setting on
and no client we never publish.

Bot-host credentials: onion clients cannot be told apart, so each client also gets
a token the gateway (gateway_policy.py) asks for on every request. The server keeps only
its SHA-256 (``clients/<name>.credential``); the bot host keeps the line
``<address> <token>`` in ``<its data dir>/anyone/credentials/<name>.credential``
and sends the token to that backend only (``bot_credentials``). They are made
whatever the client-authorization setting says: with it off, the token is what
stands between a stranger and the gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import io
import ipaddress
import os
import re
import secrets
import shutil
import sys
from pathlib import Path

from .errors import AnonStartError, ClientAuthError
from .install import default_dir
from .process import Options, exit_reason, render_torrc

ADDRESS = re.compile(r"^[a-z2-7]{56}\.anon$")
CLIENT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
VIRTUAL_PORT = 80
BOT_HOST = "bot-host"  # the client provisioned on first start, for the bot on this host
CREDENTIALS = "credentials"  # the bot host's folder of credential lines, beside client_auth/
CREDENTIAL = ".credential"
KEYS_TIMEOUT_S = 30.0


def _x25519(scalar: bytes, point: bytes) -> bytes:
    """RFC 7748 X25519 (Montgomery ladder). Runs once per generated key, so pure Python is fine."""
    p = 2**255 - 19
    k = bytearray(scalar)
    k[0] &= 248
    k[31] = (k[31] & 127) | 64
    n = int.from_bytes(k, "little")
    x1 = int.from_bytes(point, "little") & ((1 << 255) - 1)
    x2, z2, x3, z3, swap = 1, 0, x1, 1, 0
    for t in reversed(range(255)):
        bit = (n >> t) & 1
        if swap ^ bit:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = bit
        a, b, c, d = x2 + z2, x2 - z2, x3 + z3, x3 - z3
        aa, bb, da, cb = a * a % p, b * b % p, d * a % p, c * b % p
        e = aa - bb
        x3, z3 = (da + cb) ** 2 % p, x1 * (da - cb) ** 2 % p
        x2, z2 = aa * bb % p, e * (aa + 121665 * e) % p
    if swap:
        x2, z2 = x3, z3
    return (x2 * pow(z2, p - 2, p) % p).to_bytes(32, "little")


def _b32(key: bytes) -> str:
    return base64.b32encode(key).decode().rstrip("=")


def generate_client_auth(address: str) -> tuple[str, str]:
    """A new x25519 client key pair for ``address``.

    Returns (server line for ``authorized_clients/<name>.auth``,
    client line for a ``<name>.auth_private`` file in the client's ClientOnionAuthDir).
    The client line holds the private key: hand it over privately, never log it.
    """
    if not ADDRESS.match(address):
        raise ClientAuthError(f"not a .anon address: {address!r}")
    private = bytearray(secrets.token_bytes(32))
    private[0] &= 248
    private[31] = (private[31] & 127) | 64
    public = _x25519(bytes(private), (9).to_bytes(32, "little"))
    server = f"descriptor:x25519:{_b32(public)}"
    client = f"{address.removesuffix('.anon')}:descriptor:x25519:{_b32(bytes(private))}"
    return server, client


def write_client_credential(client_auth_dir: Path, name: str, client_line: str) -> Path:
    """Store a client line where our anon (ClientOnionAuthDir) reads it; owner-only file."""
    return _write_secret_line(client_auth_dir, f"{name}.auth_private", name, client_line)


def write_bot_credential(credentials_dir: Path, name: str, credential_line: str) -> Path:
    """Store a credential line (``<address> <token>``) where a Courier bot reads it; owner-only file."""
    return _write_secret_line(credentials_dir, f"{name}{CREDENTIAL}", name, credential_line)


def _write_secret_line(folder: Path, file_name: str, client_name: str, line: str) -> Path:
    if not CLIENT_NAME.match(client_name):
        raise ClientAuthError(f"client name must be 1-64 of A-Z a-z 0-9 _ -: {client_name!r}")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / file_name
    path.touch(mode=0o600)
    path.write_text(line.strip() + "\n")
    return path


def bot_credentials(credentials_dir: Path) -> dict[str, str]:
    """``.anon`` address -> token, from a bot host's credential lines (unreadable or odd lines are skipped)."""
    found = {}
    for path in sorted(Path(credentials_dir).glob(f"*{CREDENTIAL}")):
        try:
            fields = path.read_text().split()
        except OSError:
            continue
        if len(fields) == 2 and ADDRESS.match(fields[0]):
            found[fields[0]] = fields[1]
    return found


def qr_png(address: str) -> bytes:
    """A QR code (PNG) of ``http://<address>/``, for a phone's Anyone-enabled browser."""
    import qrcode

    buf = io.BytesIO()
    qrcode.make(f"http://{address}/").save(buf, format="PNG")
    return buf.getvalue()


def exposure_warning(listen: str) -> str | None:
    """A warning when ComfyUI listens beyond loopback while it is also a hidden service."""
    hosts = [h.strip() for h in (listen or "").split(",") if h.strip()] or ["127.0.0.1"]
    exposed = []
    for host in hosts:
        try:
            if ipaddress.ip_address(host.strip("[]")).is_loopback:
                continue
        except ValueError:
            if host == "localhost":
                continue
        exposed.append(host)
    if not exposed:
        return None
    return (f"ComfyUI listens on {', '.join(exposed)}, not only on loopback: anyone who can reach "
            "this machine's network address bypasses the hidden service and learns where it is. "
            "Start ComfyUI with --listen 127.0.0.1 to be reachable only through Anyone.")


class HiddenService:
    """Files and torrc lines of the persistent hidden service that fronts ``target`` (host:port)."""

    def __init__(self, anyone_dir: Path, target: str = "", *, client_auth: bool):
        self.dir = Path(anyone_dir) / "hs"
        self.clients_dir = Path(anyone_dir) / "clients"
        self.target = target
        self.client_auth = client_auth

    @property
    def address(self) -> str | None:
        """``<56 chars>.anon`` once anon has created the keys, else None."""
        try:
            text = (self.dir / "hostname").read_text().strip()
        except OSError:
            return None
        return text if ADDRESS.match(text) else None

    def clients(self) -> list[str]:
        return sorted(p.stem for p in self.clients_dir.glob("*.auth"))

    def credential_digests(self) -> frozenset[str]:
        """The SHA-256 (hex) of every client's credential: what the gateway accepts."""
        digests = set()
        for path in self.clients_dir.glob(f"*{CREDENTIAL}"):
            try:
                digests.add(path.read_text().strip())
            except OSError:
                continue
        return frozenset(d for d in digests if re.fullmatch(r"[0-9a-f]{64}", d))

    def prepare(self) -> Options:
        """Create the folders anon wants (0700), sync authorized clients; return the torrc lines."""
        for folder in (self.dir, self.dir / "authorized_clients"):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            folder.chmod(0o700)
        authorized = self.dir / "authorized_clients"
        for stale in authorized.glob("*.auth"):
            stale.unlink()
        if self.client_auth:
            if not self.clients():
                raise ClientAuthError("client authorization is on but no client is authorized yet: "
                                      "add one (python <pack> anyone-client add NAME) first")
            for source in self.clients_dir.glob("*.auth"):
                shutil.copyfile(source, authorized / source.name)
        return [("HiddenServiceDir", str(self.dir)),
                ("HiddenServicePort", f"{VIRTUAL_PORT} {self.target}")]

    def keygen_options(self, data_dir: Path) -> Options:
        """torrc of the one-off anon that only creates the keys: no network, no ports, follows its owner."""
        return [("AgreeToTerms", "1"), ("DataDirectory", str(data_dir)), ("DisableNetwork", "1"), ("SocksPort", "0"),
                ("__OwningControllerProcess", str(os.getpid())), ("Log", "err stdout"),
                ("HiddenServiceDir", str(self.dir)), ("HiddenServicePort", f"{VIRTUAL_PORT} 127.0.0.1:9")]

    async def create_keys(self, binary: Path) -> str:
        """Have anon create the service keys with the network disabled (nothing is published); the address.

        :raises AnonStartError: anon exited or wrote no hostname within KEYS_TIMEOUT_S.
        """
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        work = self.dir.parent / "keygen"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(mode=0o700)
        (work / "torrc").write_text(render_torrc(self.keygen_options(work)))
        proc = await asyncio.create_subprocess_exec(str(binary), "-f", str(work / "torrc"),
                                                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + KEYS_TIMEOUT_S
        try:
            while self.address is None:
                if proc.returncode is not None:
                    said = (await proc.stdout.read()).decode(errors="replace").splitlines()
                    raise AnonStartError(f"no hidden-service keys: {exit_reason(proc.returncode, said)}")
                if loop.time() > deadline:
                    raise AnonStartError(f"anon created no hidden-service keys in {KEYS_TIMEOUT_S:.0f} s")
                await asyncio.sleep(0.05)
            return self.address
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
            shutil.rmtree(work, ignore_errors=True)

    async def provision(self, binary: Path, client_auth_dir: Path) -> Path | None:
        """With no client yet: keys, client ``bot-host``, its line for our anon and its credential beside it
        (``credentials/``, next to ``client_auth_dir``).

        Returns the ``*.auth_private`` file written into ``client_auth_dir`` (None: nothing to do).
        """
        if self.clients():
            return None
        if self.address is None:
            await self.create_keys(binary)
        write_bot_credential(client_auth_dir.parent / CREDENTIALS, BOT_HOST, self.add_credential(BOT_HOST))
        return write_client_credential(client_auth_dir, BOT_HOST, self.add_client(BOT_HOST))

    def _address_for(self, name: str) -> str:
        """The service's address, for a new client ``name``; ClientAuthError for a bad name or no keys yet."""
        if not CLIENT_NAME.match(name):
            raise ClientAuthError(f"client name must be 1-64 of A-Z a-z 0-9 _ -: {name!r}")
        address = self.address  # read from anon's hostname file
        if address is None:
            raise ClientAuthError("the hidden service has no address yet: start Courier with "
                                  "COURIER_ANYONE=1 once so anon creates its keys")
        return address

    def add_client(self, name: str) -> str:
        """Authorize a new client; returns its client line (secret). Applies at the next (re)load."""
        address = self._address_for(name)
        server, client = generate_client_auth(address)
        self.clients_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.clients_dir / f"{name}.auth").write_text(server + "\n")
        return client

    def add_credential(self, name: str) -> str:
        """A new bot-host credential for client ``name``; returns its line ``<address> <token>`` (secret).
        Applies at the next (re)load."""
        address = self._address_for(name)
        token = secrets.token_urlsafe(32)
        self.clients_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.clients_dir / f"{name}{CREDENTIAL}").write_text(hashlib.sha256(token.encode()).hexdigest() + "\n")
        return f"{address} {token}"

    def remove_client(self, name: str) -> bool:
        """Revoke a client (key and credential); False if it was not authorized. Applies at the next (re)load."""
        path = self.clients_dir / f"{name}.auth"
        if not CLIENT_NAME.match(name) or not path.exists():
            return False
        path.unlink()
        (self.clients_dir / f"{name}{CREDENTIAL}").unlink(missing_ok=True)
        return True


def main(argv: list[str] | None = None) -> int:
    """``anyone-client add NAME | remove NAME | list``: manage who may reach the hidden service."""
    parser = argparse.ArgumentParser(prog="anyone-client",
                                     description="Client authorization for ComfyUI's hidden service")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="Courier's data directory (default: the one install-anon uses)")
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("add", help="authorize a new client; prints its secret line").add_argument("name")
    actions.add_parser("remove", help="revoke a client").add_argument("name")
    actions.add_parser("list", help="list authorized clients")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or default_dir().parent
    service = HiddenService(data_dir / "anyone", client_auth=True)
    if args.action == "list":
        print("\n".join(service.clients()))
        return 0
    if args.action == "remove":
        if not service.remove_client(args.name):
            print(f"anyone-client: no client named {args.name!r}", file=sys.stderr)
            return 1
        print("Revoked; restart ComfyUI to apply.", file=sys.stderr)
        return 0
    try:
        credential = service.add_credential(args.name)
        line = service.add_client(args.name)
    except ClientAuthError as exc:
        print(f"anyone-client: {exc}", file=sys.stderr)
        return 1
    print(line)
    print(credential)
    print(client_instructions(args.name, service.address), file=sys.stderr)
    return 0


def client_instructions(name: str, address: str) -> str:
    """Where a client's two secret lines (printed on stdout by ``anyone-client add``) go; names no secret."""
    return (f"Client {name!r} may now reach http://{address}/ once ComfyUI restarts (client authorization "
            "is on unless COURIER_ANYONE_CLIENT_AUTH=0).\n"
            "On the client host, save the two lines above -- they are secret, keep them off chats and logs:\n"
            f"  line 1, the client key: as {name}.auth_private (any name ending in .auth_private; owner-only,\n"
            "          chmod 600) in, for a Courier bot, <its data dir>/anyone/client_auth/ (its default data\n"
            "          dir is ~/.comfyui-courier, inside ComfyUI it is <ComfyUI>/user/courier); for another\n"
            "          anon or Tor client: the folder its torrc names with ClientOnionAuthDir\n"
            f"  line 2, the bot-host credential (the gateway refuses every request without it): as\n"
            f"          {name}.credential (owner-only) in <the bot's data dir>/anyone/credentials/\n"
            f"  e.g. run: anyone-client add {name} > {name}.lines; head -1 {name}.lines > {name}.auth_private;\n"
            f"            tail -1 {name}.lines > {name}.credential; rm {name}.lines\n"
            "then restart that client's anon (or Courier).")
