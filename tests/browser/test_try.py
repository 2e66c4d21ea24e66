"""``python <pack> try`` from a ComfyUI folder, used in headless Chromium, then stopped with SIGTERM.

The folder is laid out as a user's is (the real ComfyUI's files, the pack in ``custom_nodes``
under a name of its own), so ``try`` finds ComfyUI from the pack's location. The test waits
for its one line, checks ``/courier/health``, then in the web chat types ``/demo hello`` and
sees the card, and drops a picture with ``/demoedit`` as caption and sees it inverted. SIGTERM
must then stop everything it started (ComfyUI, the embedded PostgreSQL and its watcher) and
remove its data; ``TMPDIR`` points into the test's folder, so nothing of it can hide elsewhere.
Screenshots go to ``$COURIER_ARTIFACTS/browser`` (else pytest's tmp_path); README's
``docs/try-chat.png`` is a run's ``try-2-demoedit.png``. Also: the one-line reasons for a
port in use, a folder without ComfyUI, and a ComfyUI that fails to start.

A fresh ``try`` (a fresh folder, nothing after ``--``) samples out of the box: ``/img a cat --steps 4``
gets a picture from the tiny models ``try`` wrote into its own folder, with a live preview while
ComfyUI samples, and Ctrl-C says at once what it stops. The other tests' folders hold the session's
tiny models already, where ``try`` keeps them (``TINY_MODELS_DIR``), so they are not written again.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

from comfyui_courier.core.config import Secret, Settings, load_settings
from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.browser.test_chat import artifacts, drop_file
from comfyui_courier.tests.fixtures.comfyui import (
    PACK_FOLDER_NAME,
    PACK_ROOT,
    comfyui_python,
    free_port,
    processes_under,
)
from comfyui_courier.tests.support.requires import require_chromium, require_comfyui
from comfyui_courier.tools.tiny_models import CHECKPOINT, LORA
from comfyui_courier.tools.tryout import (
    ACCELERATOR_PROBE,
    BOT_ID,
    TINY_MODELS_DIR,
    bot_token,
    courier_environment,
    ready_line,
    stopping_line,
    with_device,
    with_preview,
)

pytestmark = pytest.mark.timeout(600)

READY_S = 300  # a cold ComfyUI on a busy machine, the embedded PostgreSQL's first initdb
RESULT_S = 120
STOP_S = 60
_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))
OWN = ("custom_nodes", "user", "input", "output", "temp", "models")
"""What a user's ComfyUI folder has of its own; the rest is linked from the real ComfyUI."""


def comfyui_folder(comfyui_dir: Path, root: Path) -> Path:
    """A ComfyUI folder as a user has one, with the pack in custom_nodes."""
    folder = root / "ComfyUI"
    for name in OWN:
        (folder / name).mkdir(parents=True, exist_ok=True)
    for entry in comfyui_dir.iterdir():
        if entry.name not in OWN and not entry.name.startswith("."):
            (folder / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    (folder / "custom_nodes" / PACK_FOLDER_NAME).symlink_to(PACK_ROOT, target_is_directory=True)
    return folder


def try_command(folder: Path, port: int, comfyui_port: int, *options: str, comfyui_args: tuple = (),
                pack: Path | None = None, cpu: bool = True) -> list[str]:
    # --base-directory: ComfyUI resolves main.py's link, and would use the real folder's custom_nodes
    python = comfyui_python((folder / "main.py").resolve().parent)  # the real ComfyUI's, as a user runs it
    return [python, str(pack or folder / "custom_nodes" / PACK_FOLDER_NAME), "try", "--port", str(port),
            "--comfyui-port", str(comfyui_port), *options, "--", *(["--cpu"] if cpu else []), "--listen", "127.0.0.1",
            "--base-directory", str(folder), "--database-url", f"sqlite:///{folder / 'user' / 'comfyui.db'}",
            *comfyui_args]


def environment(tmpdir: Path) -> dict[str, str]:
    tmpdir.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURIER_", "TELEGRAM_"))}
    return {**env, "TMPDIR": str(tmpdir), "COURIER_PROGRESS_INTERVAL_S": "9"}  # try sets its own


def get_json(url: str):
    with _LOCAL.open(url, timeout=10) as reply:
        return json.loads(reply.read())


def get_bytes(url: str) -> bytes:
    with _LOCAL.open(url, timeout=10) as reply:
        return reply.read()


async def read_until(stream: asyncio.StreamReader, marker: str, timeout: float) -> str:
    lines = []
    async with asyncio.timeout(timeout):
        while line := (await stream.readline()).decode():
            lines.append(line)
            if marker in line:
                return line
    raise AssertionError(f"no {marker!r} before the output ended: {''.join(lines)}")


async def outbox_until(control: str, method: str, timeout: float) -> list[dict]:
    """The bot's calls, once one of them is a ``method``."""
    calls: list[dict] = []
    async with asyncio.timeout(timeout):
        while method not in (call["method"] for call in calls):
            reply = await asyncio.to_thread(get_json, f"{control}/outbox?since={len(calls)}&timeout=5")
            calls += reply["calls"]
    return calls


def picture(color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (96, 64), color).save(buffer, "PNG")
    return buffer.getvalue()


@contextlib.asynccontextmanager
async def running_try(folder: Path, port: int, comfyui_port: int, env: dict[str, str], *options: str):
    """``try`` as a subprocess, its stderr in its stdout; stopped for good whatever happens."""
    process = await asyncio.create_subprocess_exec(
        *try_command(folder, port, comfyui_port, *options), cwd=folder, env=env, stdin=subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        yield process
    finally:
        await stop_for_good(process, folder)


async def stop_for_good(process: asyncio.subprocess.Process, folder: Path) -> None:
    """After a failure: SIGTERM, then SIGKILL, to ``try`` and to anything still running from the folder."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_S)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
    for pid in processes_under(folder):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def chromium():
    return require_chromium()


@pytest.fixture
def folder(tmp_path, tiny_models):
    folder = comfyui_folder(require_comfyui(), tmp_path)
    (folder / TINY_MODELS_DIR).parent.mkdir(parents=True)
    (folder / TINY_MODELS_DIR).symlink_to(tiny_models, target_is_directory=True)  # written once a session
    return folder


@pytest.fixture
def fresh_folder(tmp_path):
    """A ComfyUI folder as a fresh clone is: ``main.py`` and ``folder_paths.py`` are its own files (ComfyUI
    resolves their links to find its folders), so ``try`` runs it with nothing after ``--``."""
    folder = comfyui_folder(require_comfyui(), tmp_path)
    for name in ("main.py", "folder_paths.py"):
        real = (folder / name).resolve()
        (folder / name).unlink()
        shutil.copy2(real, folder / name)
    return folder


async def test_a_fresh_try_samples_img_with_a_live_preview_and_ctrl_c_says_what_it_stops(fresh_folder, chromium,
                                                                                       tmp_path):
    folder, shots, tmpdir = fresh_folder, artifacts(tmp_path), tmp_path / "tmp"
    port, comfyui_port = free_port(), free_port()
    command = [comfyui_python(require_comfyui()), str(folder / "custom_nodes" / PACK_FOLDER_NAME), "try",
               "--port", str(port), "--comfyui-port", str(comfyui_port)]  # nothing for ComfyUI: its defaults
    process = await asyncio.create_subprocess_exec(*command, cwd=folder, env=environment(tmpdir),
                                                   stdin=subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.STDOUT)
    try:
        said = [await read_until(process.stdout, "writing the tiny models", READY_S)]
        said.append(await read_until(process.stdout, "Courier is ready", READY_S))
        (comfyui,) = [pid for pid in processes_under(folder) if b"main.py" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        arguments = Path(f"/proc/{comfyui}/cmdline").read_bytes().decode().split("\0")
        assert arguments[arguments.index("--preview-method") + 1] == "auto", arguments
        models = folder / TINY_MODELS_DIR
        assert (models / CHECKPOINT).is_file() and (models / LORA).is_file()
        assert not [path for path in (folder / "models").rglob("*") if path.is_file()]  # the user's: untouched
        chat_url = f"http://127.0.0.1:{port}/"
        (bot,) = get_json(f"{chat_url}_emulator/bots")
        control = f"{chat_url}_emulator/bots/{bot['token']}"
        async with Chromium(chromium, tmp_path / "profile") as browser:
            page = await browser.new_page()
            await page.goto(chat_url)
            await page.wait_for("document.getElementById('user').options.length === 3", what="the users")
            await page.type("#text", "/img a cat --steps 4")
            await page.click("#send")
            calls = await outbox_until(control, "sendDocument", READY_S)
            await page.wait_for("[...document.querySelectorAll('.message.from-bot img.media')].filter((img) => "
                                "img.complete && img.naturalWidth === 512).length >= 2", RESULT_S,
                                "the /img picture and its document")
            await page.screenshot(shots / "try-4-img.png")
            assert not page.console, page.console
        sent = [call["method"] for call in calls]
        result = sent.index("sendDocument")
        previews = [call for call in calls[:result] if call["method"] in ("sendPhoto", "editMessageMedia")]
        assert previews and all(call["status"] == 200 for call in previews), sent
        user_id = int(calls[result]["params"]["chat_id"])
        (document,) = [m for m in get_json(f"{control}/chats/{user_id}") if "document" in m]
        picture_bytes = get_bytes(f"{control}/files/{document['document']['file_id']}")
        assert Image.open(io.BytesIO(picture_bytes)).size == (512, 512)  # SD 1.x's native size

        process.send_signal(signal.SIGINT)  # a terminal's Ctrl-C
        said.append(await read_until(process.stdout, "try: stopping", 5))  # at once, not after the 12-16 s
        assert await asyncio.wait_for(process.wait(), STOP_S) == 0
        said += (await process.stdout.read()).decode().splitlines()
    finally:
        await stop_for_good(process, folder)
    assert said[2].strip() == stopping_line(anyone=False) and said[-1] == "try: stopped", said
    assert processes_under(folder) == [] and list(tmpdir.glob("courier-try-*")) == [], said


async def test_try_brings_up_the_chain_for_the_browser_and_sigterm_removes_it(folder, chromium, tmp_path):
    shots, tmpdir = artifacts(tmp_path), tmp_path / "tmp"
    port, comfyui_port = free_port(), free_port()
    async with running_try(folder, port, comfyui_port, environment(tmpdir)) as process:
        line = await read_until(process.stdout, "Courier is ready", READY_S)
        chat_url = f"http://127.0.0.1:{port}/"
        assert chat_url in line and "ssh" not in line  # not over SSH here
        health = get_json(f"http://127.0.0.1:{comfyui_port}/courier/health")["components"]
        assert {name: health[name]["state"] for name in ("database", "bot", "dispatcher")} == dict.fromkeys(
            ("database", "bot", "dispatcher"), "ok")
        (scratch,) = tmpdir.glob("courier-try-*")
        pgdata = (scratch / "courier" / "postgres").resolve()
        assert (pgdata / "PG_VERSION").is_file()
        (bot,) = get_json(f"{chat_url}_emulator/bots")
        control = f"{chat_url}_emulator/bots/{bot['token']}"

        async with Chromium(chromium, tmp_path / "profile") as browser:
            page = await browser.new_page()
            await page.send("Emulation.setDeviceMetricsOverride", {"width": 760, "height": 1000,
                                                                   "deviceScaleFactor": 1, "mobile": False})
            await page.goto(chat_url)
            await page.wait_for("document.getElementById('user').options.length === 3", what="the users")
            await page.type("#text", "/")
            await page.wait_for("[...document.querySelectorAll('#suggestions b')].some((b) => b.textContent === "
                                "'/demoedit')", what="the bot's menu")
            menus = {user["language_code"]: get_json(f"{control}/menu/{user['id']}")
                     for user in get_json(f"{chat_url}_emulator/users")}
            assert {tuple(c["command"] for c in menu) for menu in menus.values()} == {
                tuple(c["command"] for c in menus["en"])}  # the same commands for every user ...
            assert len({json.dumps(menu) for menu in menus.values()}) == len(menus) == 3  # ... in their language
            await page.type("#text", "/demo hello")
            await page.click("#send")
            await page.wait_for("document.querySelector('.message.from-bot img.media')?.naturalWidth === 512",
                                RESULT_S, "the /demo card")
            await page.screenshot(shots / "try-1-demo.png")
            user_id = int(await page.evaluate("document.getElementById('user').value"))
            cards = [m for m in get_json(f"{control}/chats/{user_id}") if "document" in m]
            card = Image.open(io.BytesIO(get_bytes(f"{control}/files/{cards[0]['document']['file_id']}")))
            assert card.format == "PNG" and card.size == (512, 512)

            await drop_file(page, "#messages", picture((200, 40, 40)), "red.png", "image/png")
            await page.type("#text", "/demoedit")
            await page.click("#send")
            await page.wait_for("[...document.querySelectorAll('.message.from-bot img.media')]"
                                ".some((img) => img.naturalWidth === 96)", RESULT_S, "the inverted picture")
            await page.wait_for("[...document.querySelectorAll('img.media')].every((img) => img.complete) && (list =>"
                                " list.scrollHeight - list.scrollTop - list.clientHeight < 2)(document.getElementById("
                                "'messages'))", what="every picture loaded and the newest message in view")
            await page.screenshot(shots / "try-2-demoedit.png")

            await page.type("#text", "/lang")  # a button of the bot's own: the language choice
            await page.click("#send")
            await page.wait_for("[...document.querySelectorAll('.keyboard button')].some((b) => b.textContent === "
                                "'Deutsch')", RESULT_S, "the language buttons")
            await page.evaluate("[...document.querySelectorAll('.keyboard button')].find((b) => b.textContent === "
                                "'Deutsch').click()")
            await page.wait_for("[...document.querySelectorAll('.message.from-bot')].some((m) => m.textContent"
                                ".includes('Ab jetzt antworte ich dir auf Deutsch'))", RESULT_S,
                                "the German confirmation")
            await page.screenshot(shots / "try-3-lang-button.png")
            assert not page.console, page.console
        (result,) = [m for m in get_json(f"{control}/chats/{user_id}")
                     if "document" in m and m["document"]["file_id"] != cards[0]["document"]["file_id"]]
        inverted = Image.open(io.BytesIO(get_bytes(f"{control}/files/{result['document']['file_id']}")))
        red, green, blue = inverted.convert("RGB").getpixel((48, 32))
        assert abs(red - 55) <= 8 and abs(green - 215) <= 8 and abs(blue - 215) <= 8  # 255 - x, after a JPEG photo

        log = (scratch / "comfyui.log").read_text()  # gone once try has stopped
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), STOP_S) == 0
        said = (await process.stdout.read()).decode()
    assert bot["token"].partition(":")[2] not in line + said + log  # the chat page lists it; nothing prints it
    assert processes_under(folder) == [] and processes_under(tmpdir) == [] and processes_under(pgdata) == []
    assert list(tmpdir.glob("courier-try-*")) == [] and not pgdata.exists(), said


def run_try(folder: Path, tmp_path: Path, *options: str, port: int | None = None,
            comfyui_args: tuple = ()) -> subprocess.CompletedProcess:
    command = try_command(folder, port or free_port(), free_port(), *options, comfyui_args=comfyui_args)
    return subprocess.run(command, cwd=folder, env=environment(tmp_path / "tmp"), capture_output=True, text=True,
                          timeout=READY_S, check=False)


def test_a_port_in_use_is_one_line(folder, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_try(folder, tmp_path, port=port)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"try: port {port} is in use; choose another with --port\n"


def test_a_folder_without_comfyui_is_one_line(folder, tmp_path):
    done = run_try(folder, tmp_path, "--comfyui-dir", str(tmp_path))
    assert done.returncode == 1
    assert done.stderr == f"try: no ComfyUI in {tmp_path} (no main.py there); name its folder with --comfyui-dir\n"


def test_a_comfyui_that_fails_to_start_is_one_line_and_leaves_nothing(folder, tmp_path):
    done = run_try(folder, tmp_path, "--timeout", "120", comfyui_args=("--no-such-option",))
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("try: ComfyUI exited with code 2 before it was ready: ")
    assert "unrecognized arguments: --no-such-option" in done.stderr
    assert list((tmp_path / "tmp").glob("courier-try-*")) == []


def test_a_comfyui_without_the_pack_is_one_line_and_leaves_nothing(folder, tmp_path):
    (folder / "custom_nodes" / PACK_FOLDER_NAME).unlink()
    command = try_command(folder, free_port(), free_port(), "--comfyui-dir", str(folder), pack=PACK_ROOT)
    done = subprocess.run(command, cwd=folder, env=environment(tmp_path / "tmp"), capture_output=True, text=True,
                          timeout=READY_S, check=False)
    assert done.returncode == 1 and done.stderr == (
        f"try: ComfyUI in {folder} runs without this pack (no /courier/health); is the pack in its custom_nodes?\n")
    assert processes_under(folder) == [] and list((tmp_path / "tmp").glob("courier-try-*")) == []


def test_anyone_without_anon_is_one_line(folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.comfyui-courier/bin/anon
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    done = run_try(folder, tmp_path, "--anyone")
    assert done.returncode == 1
    assert done.stderr.startswith("try: --anyone needs the anon binary, which is not installed"), done.stderr


async def test_try_with_anyone_reaches_comfyui_only_as_a_hidden_service(folder, anon_binary, tmp_path):
    """The whole product on one machine: the bot's only backend is ComfyUI's ``.anon`` address."""
    tmpdir = tmp_path / "tmp"
    port, comfyui_port = free_port(), free_port()
    env = {**environment(tmpdir), "COURIER_ANON_BINARY": str(anon_binary)}
    async with running_try(folder, port, comfyui_port, env, "--anyone") as process:
        line = await read_until(process.stdout, "Courier is ready", READY_S)
        health = get_json(f"http://127.0.0.1:{comfyui_port}/courier/health")["components"]
        assert health["anyone"] == {"state": "ok"}  # a hidden service's health names no address without the token
        assert re.search(r"reaches ComfyUI as http://[a-z2-7]{56}\.anon", line), line
        (bot,) = get_json(f"http://127.0.0.1:{port}/_emulator/bots")
        control = f"http://127.0.0.1:{port}/_emulator/bots/{bot['token']}"
        request = urllib.request.Request(f"{control}/messages", method="POST", headers={
            "Content-Type": "application/json"}, data=json.dumps({"user_id": 42, "text": "/demo onion"}).encode())
        with _LOCAL.open(request, timeout=10) as reply:
            sent = json.loads(reply.read())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESULT_S
        while not (cards := [m for m in get_json(f"{control}/chats/42") if "document" in m]):
            assert loop.time() < deadline, get_json(f"{control}/chats/42")
            await asyncio.sleep(0.5)
        assert cards[0]["reply_to_message"]["message_id"] == sent["message_id"]
        (scratch,) = tmpdir.glob("courier-try-*")
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), STOP_S) == 0
        said = (await process.stdout.read()).decode()
    assert processes_under(folder) == [] and processes_under(scratch) == []  # anon and the private network too
    assert not scratch.exists(), said


async def test_a_stop_before_ready_stops_comfyui_and_removes_the_data(folder, tmp_path):
    """Ctrl-C while ComfyUI is still starting (a terminal's SIGINT reaches ``try``, not ComfyUI)."""
    tmpdir = tmp_path / "tmp"
    async with running_try(folder, free_port(), free_port(), environment(tmpdir)) as process:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_S
        while not [pid for pid in processes_under(folder) if b"main.py" in Path(f"/proc/{pid}/cmdline").read_bytes()]:
            assert loop.time() < deadline and process.returncode is None, "ComfyUI never started"
            await asyncio.sleep(0.1)
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), STOP_S) == 0
        said = (await process.stdout.read()).decode()
    assert processes_under(folder) == [] and processes_under(tmpdir) == [], said
    assert list(tmpdir.glob("courier-try-*")) == [] and "Courier is ready" not in said, said


def test_the_ready_line_over_ssh_names_the_tunnel(monkeypatch):
    monkeypatch.setenv("SSH_CONNECTION", "192.0.2.7 51000 192.0.2.5 22")
    monkeypatch.setenv("USER", "ada")
    monkeypatch.setenv("LOGNAME", "ada")
    line = ready_line(8081, {"anyone": {"state": "off"}})
    assert line.startswith("Courier is ready: chat with the bot at http://127.0.0.1:8081/")
    assert "ssh -N -L 8081:127.0.0.1:8081 ada@192.0.2.5, then open http://127.0.0.1:8081/" in line
    assert "\n" not in line


def test_courier_runs_with_its_defaults_whatever_the_environment_or_courier_toml(monkeypatch, tmp_path):
    """A real bot's token, database or webhook must not leak into the try."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "42:the-real-bot")
    monkeypatch.setenv("COURIER_DATABASE_URL", "postgresql://real/db")
    (tmp_path / "courier.toml").write_text('database_url = "postgresql://toml/db"\nwebhook_url = "https://x"\n'
                                           "allowed_users = [1]\nanyone_enabled = true\n")
    env = courier_environment("http://127.0.0.1:8081", "1000000001:try", tmp_path / "data")
    settings = load_settings(tmp_path / "courier.toml", environ=env)
    assert len(env["COURIER_ADMIN_TOKEN"]) >= 43  # try's own, new each run: it reads the hidden service's health
    assert settings == Settings(telegram_bot_token=Secret("1000000001:try"), telegram_api_url="http://127.0.0.1:8081",
                                data_dir=str(tmp_path / "data"), progress_interval_s=1, allowed_users=["*"],
                                admin_token=Secret(env["COURIER_ADMIN_TOKEN"]))


def test_the_bot_token_is_new_each_run_and_keeps_the_bot_id():
    """A web page cannot know it (the emulator's guard keeps it from listing it); --keep's database keeps the bot."""
    tokens = {bot_token() for _ in range(2)}
    assert len(tokens) == 2
    for token in tokens:
        bot_id, _, secret = token.partition(":")
        assert int(bot_id) == BOT_ID and len(secret) == 35 and secret.replace("-", "").replace("_", "").isalnum()


def test_comfyui_gets_a_live_preview_unless_its_arguments_choose_a_method():
    assert with_preview(["--listen", "127.0.0.1"]) == ["--listen", "127.0.0.1", "--preview-method", "auto"]
    for chosen in (["--preview-method", "none"], ["--preview-method=taesd"]):
        assert with_preview(["--cpu", *chosen]) == ["--cpu", *chosen]


def test_no_accelerator_means_cpu_said_in_one_line():
    none = {"cuda": False, "xpu": False, "mps": False}
    args, said = with_device(["--listen", "127.0.0.1"], lambda: none)
    assert args == ["--listen", "127.0.0.1", "--cpu"] and said.count("\n") == 0 and "--cpu" in said
    for found in ({**none, "cuda": True}, {**none, "xpu": True}, {**none, "mps": True}):
        assert with_device(["--listen", "127.0.0.1"], lambda found=found: found) == (["--listen", "127.0.0.1"], None)

    def unasked():
        raise AssertionError("probed although --cpu was given")

    assert with_device(["--cpu"], unasked) == (["--cpu"], None)  # asked for already: nothing to say
    assert with_device(["--listen", "127.0.0.1"], lambda: None) == (["--listen", "127.0.0.1"], None)  # probe failed


async def test_try_on_a_machine_without_a_gpu_starts_comfyui_with_cpu_and_says_so(folder, tmp_path):
    """No ``--cpu`` given: ``try`` probes ComfyUI's Python and adds it when torch sees no device."""
    python = comfyui_python((folder / "main.py").resolve().parent)
    probed = json.loads(subprocess.run([python, "-c", ACCELERATOR_PROBE], capture_output=True, text=True,
                                       check=True, timeout=120).stdout)
    process = await asyncio.create_subprocess_exec(
        *try_command(folder, free_port(), free_port(), cpu=False), cwd=folder, env=environment(tmp_path / "tmp"),
        stdin=subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_S
        while not (started := [pid for pid in processes_under(folder)
                               if b"main.py" in Path(f"/proc/{pid}/cmdline").read_bytes()]):
            assert loop.time() < deadline and process.returncode is None, "ComfyUI never started"
            await asyncio.sleep(0.1)
        arguments = Path(f"/proc/{started[0]}/cmdline").read_bytes().split(b"\0")
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), STOP_S) == 0
        said = (await process.stdout.read()).decode()
    finally:
        await stop_for_good(process, folder)
    told = [line for line in said.splitlines() if "--cpu" in line]
    if any(probed.values()):  # a machine with a GPU: ComfyUI uses it
        assert b"--cpu" not in arguments and not told, said
    else:
        assert b"--cpu" in arguments, arguments
        assert told == ["try: ComfyUI's Python sees no GPU (torch finds no CUDA, XPU or MPS device): "
                        "starting ComfyUI with --cpu, which is slow"], said
