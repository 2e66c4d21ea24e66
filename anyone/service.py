"""AnyoneService: what the host starts -- anon, the hidden service, its gateway, the SOCKS port for clients.

The hidden service forwards to the gateway (gateway.py, a filtering proxy on
127.0.0.1), which passes only the routes a Courier bot needs on to ComfyUI.

Layout under ``<data_dir>/anyone/``: ``anon/`` (anon's DataDirectory), ``hs/``
(hidden-service keys and hostname), ``clients/`` (public keys of authorized
clients), ``client_auth/`` (``*.auth_private`` lines that let *our* anon reach
services that use client authorization, this host's own included), and in tests only
``test-network.torrc`` (join a private test network instead of the public one;
see privnet.load_test_network).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from ..core.logs import get_logger
from .errors import AnonStartError, AnyoneError, ClientAuthError
from .gateway import Gateway
from .gateway_policy import NodeTypes
from .hidden_service import CREDENTIAL, CREDENTIALS, HiddenService, exposure_warning
from .install import find_anon
from .privnet import TEST_NETWORK_FILE, load_test_network
from .process import AnonProcess, Options

log = get_logger("anyone")

ANNOUNCE_TIMEOUT_S = 60.0


class AnyoneService:
    """``await start()`` returns at once; anon boots and is supervised in the background.

    ``local_backend`` (``http://127.0.0.1:8188``) is published as a hidden service,
    through the gateway; None runs anon only as a client (a bot host without ComfyUI). ``health`` is the
    host's Health registry (component ``anyone``); ``listen`` is ComfyUI's
    ``--listen`` value, checked for exposure beyond loopback. ``network_options``
    are extra torrc lines, e.g. a private test network's. ``node_types`` tells the gateway which node
    types a Courier bot may queue (see gateway.Policy; without it no prompt passes); ``graph_check``
    judges a prompt's input values (the runtime gives ``jobs.file_inputs.refusal``: anyone/ never imports jobs/).
    """

    def __init__(self, settings, data_dir: Path, local_backend: str | None = None, health=None, *,
                 listen: str | None = None, network_options: Options = (), node_types: NodeTypes | None = None,
                 graph_check: Callable[[dict], str | None] | None = None):
        self.settings = settings
        self.dir = Path(data_dir) / "anyone"
        self.local_backend = local_backend
        self._health = health
        self.listen = listen
        self.network_options = list(network_options)
        self.hidden_service: HiddenService | None = None
        self.gateway: Gateway | None = None
        if local_backend:
            self.hidden_service = HiddenService(self.dir, client_auth=settings.anyone_client_auth)
            self.gateway = Gateway(local_backend, expose_ui=settings.anyone_expose_ui)
            self.gateway.policy.node_types = node_types
            self.gateway.policy.graph_check = graph_check
        self.process: AnonProcess | None = None
        self.warning: str | None = None
        self.test_network: Path | None = None  # the test-network.torrc we joined, if any
        self._state = {"state": "off", "reason": "not started", "bootstrap": 0}
        self._announce: asyncio.Task | None = None

    @property
    def onion_address(self) -> str | None:
        """``<56 chars>.anon`` of this ComfyUI once anon has created its keys (survives restarts)."""
        return self.hidden_service.address if self.hidden_service and self.process else None

    @property
    def socks_url(self) -> str | None:
        """The SOCKS port for ``.anon`` backends: the ``anyone_socks_url`` setting, else our anon's."""
        if self.settings.anyone_socks_url:
            return self.settings.anyone_socks_url
        if self.process is not None:
            return f"socks5h://127.0.0.1:{self.process.socks_port}"
        return None

    def health(self) -> dict:
        report = dict(self.process.health()) if self.process else dict(self._state)
        if self.hidden_service is not None:
            report["onion_address"] = self.onion_address
            report["client_auth"] = self.settings.anyone_client_auth
            report["expose_ui"] = self.settings.anyone_expose_ui
        if self.warning:
            report["warning"] = self.warning
        if self.test_network is not None:
            report["network"] = f"private test network ({self.test_network})"
        return report

    async def start(self) -> None:
        """Check settings and launch anon in the background; problems become health errors."""
        if self.process is not None:
            return
        if not self.settings.anyone_enabled:
            return self._report("off", "COURIER_ANYONE is not enabled")
        if not self.settings.anyone_agree_to_terms:
            return self._report("error", "anon runs only after you accept the Anyone network terms "
                                         "(https://www.anyone.io/terms): set COURIER_ANYONE_AGREE_TO_TERMS=1")
        binary = find_anon(self.settings.anon_binary, self.dir.parent)
        if binary is None or not binary.is_file():
            return self._report("error", f"anon binary not found ({binary or 'not in PATH'}): run "
                                         "`python <pack folder> install-anon` or set COURIER_ANON_BINARY")
        options = [("ClientOnionAuthDir", str(self._client_auth_dir())), *self.network_options]
        try:
            test_network = load_test_network(self.dir / TEST_NETWORK_FILE)
        except (AnyoneError, OSError) as exc:
            return self._report("error", str(exc))
        if test_network:
            self.test_network = self.dir / TEST_NETWORK_FILE
            log.warning("anon joins the private test network of %s, not the public Anyone network",
                        self.test_network)
            options += test_network
        if self.hidden_service is not None:
            warnings = [w for w in (exposure_warning(self.listen) if self.listen is not None else None,
                                    self._open_warning()) if w]
            for warning in warnings:
                log.warning("%s", warning)
            self.warning = " ".join(warnings) or None
            try:
                credential = await self.hidden_service.provision(binary, self._client_auth_dir())
                self.gateway.policy.credentials = self.hidden_service.credential_digests()
                self.hidden_service.target = await self.gateway.start()
                options += self.hidden_service.prepare()
            except (AnonStartError, ClientAuthError, OSError) as exc:
                await self.gateway.stop()
                return self._report("error", f"hidden service not published: {exc}")
            if credential is not None:
                log.info("Client %r was authorized for the bot on this host; its secret client key is in %s "
                         "and its bot-host credential in %s (owner-only). A bot on another host needs both files "
                         "(show them with `cat`), in <its data dir>/anyone/client_auth/ and "
                         "<its data dir>/anyone/credentials/; more clients: `python <pack folder> "
                         "anyone-client --data-dir %s add NAME`", credential.stem, credential,
                         self.dir / CREDENTIALS / f"{credential.stem}{CREDENTIAL}", self.dir.parent)
        self.process = AnonProcess(binary, self.dir / "anon", options=options, on_change=self._on_change)
        await self.process.start()
        if self.hidden_service is not None:
            self._announce = asyncio.create_task(self._log_address(), name="courier-anyone-address")

    async def stop(self) -> None:
        if self._announce is not None:
            self._announce.cancel()
        if self.process is not None:
            await self.process.stop()
            self.process = None
        if self.gateway is not None:
            await self.gateway.stop()
        self._report("off", "stopped")

    async def wait_ready(self, timeout: float) -> None:
        """Wait until anon has bootstrapped (tests, tools); raises AnyoneError if it is not running."""
        if self.process is None:
            raise AnyoneError(f"anon is not running: {self._state['reason']}")
        await self.process.wait_bootstrapped(timeout)

    async def add_client(self, name: str) -> tuple[str, str]:
        """Authorize a client of the hidden service now; returns its secret client line and credential line."""
        if self.hidden_service is None:
            raise ClientAuthError("no hidden service here")
        credential = self.hidden_service.add_credential(name)
        line = self.hidden_service.add_client(name)
        self.gateway.policy.credentials = self.hidden_service.credential_digests()
        if self.process is not None and self.settings.anyone_client_auth:
            self.hidden_service.prepare()
            await self.process.reload()
        return line, credential

    def _open_warning(self) -> str | None:
        """What the operator opted out of, loudly: client authorization, the route filter."""
        exposed = ("every ComfyUI route (COURIER_ANYONE_EXPOSE_UI=1): the editor, user data and, with "
                   "ComfyUI-Manager, node installation, i.e. running code on this machine"
                   if self.settings.anyone_expose_ui else "the routes a Courier bot needs")
        if not self.settings.anyone_client_auth:
            return (f"CLIENT AUTHORIZATION IS OFF (COURIER_ANYONE_CLIENT_AUTH=0): anyone who learns this "
                    f"hidden service's address reaches {exposed}. Unset the setting to require client keys.")
        if self.settings.anyone_expose_ui:
            return f"The hidden service passes {exposed}, to every authorized client."
        return None

    def _client_auth_dir(self) -> Path:
        path = self.dir / "client_auth"
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.chmod(0o700)
        return path

    async def _log_address(self) -> None:
        for _ in range(int(ANNOUNCE_TIMEOUT_S / 0.2)):
            if self.onion_address:
                log.info("ComfyUI is published as the hidden service http://%s/%s", self.onion_address,
                         " (client authorization on)" if self.settings.anyone_client_auth else "")
                return
            await asyncio.sleep(0.2)

    def _report(self, state: str, reason: str) -> None:
        self._state = {"state": state, "reason": reason, "bootstrap": 0}
        if state == "error":
            log.error("Anyone: %s", reason)
        self._on_change()

    def _on_change(self, _process_health: dict | None = None) -> None:
        if self._health is not None:
            report = self.health()
            details = {k: v for k, v in report.items() if k not in ("state", "reason")}
            self._health.set("anyone", report["state"], report["reason"], **details)
