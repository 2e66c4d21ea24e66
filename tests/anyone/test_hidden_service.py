"""Hidden service files, client authorization keys, QR code and the exposure warning."""

import base64
import stat

import pytest

from comfyui_courier.anyone import (
    ClientAuthError,
    exposure_warning,
    generate_client_auth,
    qr_png,
)
from comfyui_courier.anyone.gateway_policy import digest
from comfyui_courier.anyone.hidden_service import (
    ADDRESS as ADDRESS_FORMAT,
)
from comfyui_courier.anyone.hidden_service import (
    BOT_HOST,
    CREDENTIAL,
    CREDENTIALS,
    HiddenService,
    _x25519,
    bot_credentials,
    write_client_credential,
)

ADDRESS = "wfy2yxcngp7liper5a3h6fodo7s5mlobfz7a5e7jmrym6gr6gshhyeid.anon"


@pytest.mark.parametrize("scalar, point, expected", [  # RFC 7748, section 5.2 and 6.1
    ("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
     "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
     "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"),
    ("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", "09" + "00" * 31,
     "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"),
    ("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", "09" + "00" * 31,
     "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"),
])
def test_x25519_rfc7748_vectors(scalar, point, expected):
    assert _x25519(bytes.fromhex(scalar), bytes.fromhex(point)).hex() == expected


def test_client_auth_lines_pair_up():
    server, client = generate_client_auth(ADDRESS)
    kind, curve, public = server.split(":")
    onion, kind2, curve2, private = client.split(":")
    assert (kind, curve, kind2, curve2) == ("descriptor", "x25519", "descriptor", "x25519")
    assert onion == ADDRESS.removesuffix(".anon")
    assert len(public) == len(private) == 52
    private_key = base64.b32decode(private + "====")
    assert _x25519(private_key, (9).to_bytes(32, "little")) == base64.b32decode(public + "====")
    assert generate_client_auth(ADDRESS) != (server, client)


def test_client_auth_needs_a_real_address():
    with pytest.raises(ClientAuthError):
        generate_client_auth("example.com")


def test_prepare_syncs_authorized_clients_with_the_setting(tmp_path):
    hs = HiddenService(tmp_path, "127.0.0.1:8188", client_auth=True)
    with pytest.raises(ClientAuthError, match="no client is authorized"):
        hs.prepare()  # anon would publish an open service
    with pytest.raises(ClientAuthError, match="no address yet"):
        hs.add_client("phone")
    (hs.dir / "hostname").write_text(ADDRESS + "\n")
    assert hs.address == ADDRESS
    client_line = hs.add_client("phone")
    assert client_line.startswith(ADDRESS.removesuffix(".anon") + ":descriptor:x25519:")
    options = hs.prepare()
    assert options == [("HiddenServiceDir", str(hs.dir)), ("HiddenServicePort", "80 127.0.0.1:8188")]
    assert stat.S_IMODE(hs.dir.stat().st_mode) == 0o700
    assert [p.name for p in (hs.dir / "authorized_clients").iterdir()] == ["phone.auth"]
    assert hs.clients() == ["phone"]

    HiddenService(tmp_path, "127.0.0.1:8188", client_auth=False).prepare()
    assert list((hs.dir / "authorized_clients").iterdir()) == []  # off means off
    assert hs.remove_client("phone") and not hs.remove_client("phone")


async def test_provision_authorizes_this_hosts_bot_once(tmp_path):
    hs = HiddenService(tmp_path, "127.0.0.1:1", client_auth=True)
    (hs.dir).mkdir(parents=True)
    (hs.dir / "hostname").write_text(ADDRESS + "\n")  # keys exist: no anon needed
    credential = await hs.provision(tmp_path / "no-anon-needed", tmp_path / "client_auth")
    assert credential == tmp_path / "client_auth" / f"{BOT_HOST}.auth_private"
    assert stat.S_IMODE(credential.stat().st_mode) == 0o600
    onion, _, _, private = credential.read_text().strip().split(":")
    public = (hs.clients_dir / f"{BOT_HOST}.auth").read_text().strip().split(":")[2]
    assert onion == ADDRESS.removesuffix(".anon")
    assert _x25519(base64.b32decode(private + "===="), (9).to_bytes(32, "little")) == base64.b32decode(public + "====")
    line = (tmp_path / CREDENTIALS / f"{BOT_HOST}{CREDENTIAL}").read_text().split()
    assert line[0] == ADDRESS
    assert stat.S_IMODE((tmp_path / CREDENTIALS / f"{BOT_HOST}{CREDENTIAL}").stat().st_mode) == 0o600
    assert hs.credential_digests() == {digest(line[1])}  # the backend keeps only the hash
    assert line[1] not in (hs.clients_dir / f"{BOT_HOST}{CREDENTIAL}").read_text()
    assert bot_credentials(tmp_path / CREDENTIALS) == {ADDRESS: line[1]}
    assert await hs.provision(tmp_path / "no-anon-needed", tmp_path / "client_auth") is None  # once
    assert [p.name for p in (tmp_path / "client_auth").iterdir()] == [f"{BOT_HOST}.auth_private"]
    off = HiddenService(tmp_path / "off", client_auth=False)  # a credential all the same: the gateway wants it
    (off.dir).mkdir(parents=True)
    (off.dir / "hostname").write_text(ADDRESS + "\n")
    assert await off.provision(tmp_path / "no-anon-needed", tmp_path / "off" / "client_auth") is not None
    assert len(off.credential_digests()) == 1 and (tmp_path / "off" / CREDENTIALS / f"{BOT_HOST}{CREDENTIAL}").exists()
    assert off.remove_client(BOT_HOST) and off.credential_digests() == frozenset()


async def test_anon_creates_the_keys_with_the_network_disabled(anon_binary, tmp_path):
    hs = HiddenService(tmp_path, "127.0.0.1:1", client_auth=True)
    address = await hs.create_keys(anon_binary)
    assert ADDRESS_FORMAT.match(address) and address == hs.address
    assert (hs.dir / "hs_ed25519_secret_key").read_bytes().startswith(b"== ed25519v1-secret: type0 ==")
    assert not (tmp_path / "keygen").exists()  # the throwaway DataDirectory is gone
    options = dict(hs.keygen_options(tmp_path / "keygen"))
    assert options["DisableNetwork"] == "1" and options["SocksPort"] == "0"  # nothing published, nothing listens
    assert await hs.create_keys(anon_binary) == address  # existing keys are kept


def test_client_names_are_file_safe(tmp_path):
    with pytest.raises(ClientAuthError):
        write_client_credential(tmp_path, "../evil", "x")
    path = write_client_credential(tmp_path / "auth", "backend1", "line\n")
    assert path.read_text() == "line\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_qr_png():
    png = qr_png(ADDRESS)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 500


@pytest.mark.parametrize("listen, exposed", [
    ("127.0.0.1", False), ("::1", False), ("localhost", False), ("", False),
    ("0.0.0.0", True), ("::", True), ("192.168.1.5", True), ("127.0.0.1,0.0.0.0", True),
])
def test_exposure_warning(listen, exposed):
    warning = exposure_warning(listen)
    assert (warning is not None) == exposed
    if exposed:
        assert "--listen 127.0.0.1" in warning


def test_anyone_client_command(tmp_path, capsys):
    from comfyui_courier.anyone.hidden_service import main

    assert main(["--data-dir", str(tmp_path), "add", "phone"]) == 1
    assert "no address yet" in capsys.readouterr().err
    (tmp_path / "anyone" / "hs").mkdir(parents=True)
    (tmp_path / "anyone" / "hs" / "hostname").write_text(ADDRESS)
    assert main(["--data-dir", str(tmp_path), "add", "phone"]) == 0
    out, err = capsys.readouterr()
    key_line, credential_line = out.splitlines()  # the two secret lines alone on stdout, the key first
    assert key_line.startswith(ADDRESS.removesuffix(".anon") + ":descriptor:x25519:")
    assert credential_line.split()[0] == ADDRESS and len(credential_line.split()) == 2
    assert key_line not in err and credential_line.split()[1] not in err and "secret" in err
    for where in ("phone.auth_private", "anyone/client_auth/", "ClientOnionAuthDir", f"http://{ADDRESS}/",
                  "phone.credential", "anyone/credentials/"):
        assert where in err
    assert main(["--data-dir", str(tmp_path), "list"]) == 0
    assert capsys.readouterr().out.split() == ["phone"]
    assert main(["--data-dir", str(tmp_path), "remove", "phone"]) == 0
    assert main(["--data-dir", str(tmp_path), "remove", "phone"]) == 1
