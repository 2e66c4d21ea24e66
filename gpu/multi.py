"""One ComfyUI per GPU on one host, each a backend of the same bot: ``python <pack> multi-gpu``.

Every instance runs the same ComfyUI folder (so the same models and custom nodes, this pack
included) with ``--cuda-device N`` (it then sees only that GPU, as ``cuda:0``), its own port,
and its own user, output and temp folders plus ComfyUI's own SQLite file inside its state
folder. Separate user folders give each pack its own state (data dir, logs); separate output
folders keep two instances from picking the same numbered file name; separate temp folders
survive ComfyUI wiping its temp folder at start. All instances share one PostgreSQL
(``COURIER_DATABASE_URL``, required), so jobs, commands and benchmark runs are common.

The first instance runs the bot (``TELEGRAM_BOT_TOKEN`` from the environment) with
``COURIER_BACKENDS`` listing every instance, so its dispatcher runs one job per GPU at a
time; the others start without a token (no second poller on the same bot) and without anon.
A standalone bot (``python <pack> run``) can take that ``COURIER_BACKENDS`` line instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

DEFAULT_BASE_PORT = 8188
DEFAULT_SCRIPT = "comfyui-gpus.sh"
DEFAULT_STATE = "comfyui-gpus"
MAX_GPUS = 64
STOP_GRACE_S = 30
"""How long the script waits for its ComfyUIs after SIGTERM before it SIGKILLs those left."""


class PlanError(ValueError):
    """The arguments cannot make a working set of instances; the message says why."""


@dataclasses.dataclass(frozen=True)
class Instance:
    gpu: int
    port: int
    state_dir: Path  # <state>/gpu<N>: user/, output/, temp/, comfyui.log
    runs_bot: bool

    @property
    def user_dir(self) -> Path:
        return self.state_dir / "user"

    @property
    def output_dir(self) -> Path:
        return self.state_dir / "output"

    @property
    def temp_dir(self) -> Path:
        return self.state_dir  # ComfyUI appends "temp"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "comfyui.log"


@dataclasses.dataclass(frozen=True)
class Plan:
    comfyui_dir: Path
    python: str
    listen: str
    instances: tuple[Instance, ...]
    comfyui_args: tuple[str, ...] = ()
    base_directory: Path | None = None  # ComfyUI's --base-directory (models, custom_nodes, input), shared
    stop_grace_s: int = STOP_GRACE_S

    def url(self, instance: Instance) -> str:
        host = "127.0.0.1" if self.listen in ("0.0.0.0", "::", "0.0.0.0,::", "") else self.listen
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{instance.port}"

    @property
    def backends(self) -> str:
        """The value of COURIER_BACKENDS for the bot."""
        return ",".join(self.url(i) for i in self.instances)

    def command(self, instance: Instance) -> list[str]:
        """ComfyUI's command line for ``instance``."""
        return [self.python, str(self.comfyui_dir / "main.py"), "--cuda-device", str(instance.gpu),
                "--listen", self.listen, "--port", str(instance.port),
                "--user-directory", str(instance.user_dir), "--output-directory", str(instance.output_dir),
                "--temp-directory", str(instance.temp_dir),
                "--database-url", f"sqlite:///{instance.user_dir / 'comfyui.db'}",
                *(["--base-directory", str(self.base_directory)] if self.base_directory else []),
                *self.comfyui_args]

    def environment(self, instance: Instance) -> dict[str, str | None]:
        """What each instance's environment changes: None unsets a variable."""
        env: dict[str, str | None] = {"COURIER_DATA_DIR": None}  # the default: <user dir>/courier
        if instance.runs_bot:
            env["COURIER_BACKENDS"] = self.backends
        else:
            env.update(TELEGRAM_BOT_TOKEN=None, COURIER_ANYONE="0")
        return env


def parse_gpus(text: str) -> list[int]:
    """``"0,1"`` -> [0, 1]; PlanError for anything but distinct non-negative integers."""
    gpus = []
    for raw in text.split(","):
        part = raw.strip()
        if not part.isascii() or not part.isdigit():
            raise PlanError(f"--gpus takes CUDA device numbers separated by commas, not {part!r}")
        if int(part) in gpus:
            raise PlanError(f"--gpus names device {int(part)} twice")
        gpus.append(int(part))
    if not gpus or len(gpus) > MAX_GPUS:
        raise PlanError(f"--gpus takes 1 to {MAX_GPUS} devices")
    return gpus


def detect_gpus() -> list[int]:
    """The CUDA devices ``nvidia-smi -L`` lists; [] when there is none or no nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return list(range(sum(line.startswith("GPU ") for line in listed.splitlines())))


def comfyui_python(comfyui_dir: Path) -> str:
    """ComfyUI's interpreter: its .venv (or venv) if there is one, else this one."""
    for name in (".venv", "venv"):
        candidate = comfyui_dir / name / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    return sys.executable


def make_plan(comfyui_dir: Path, gpus: list[int], *, base_port: int = DEFAULT_BASE_PORT,
              state_dir: Path | None = None, listen: str = "127.0.0.1", python: str | None = None,
              comfyui_args: tuple[str, ...] = (), base_directory: Path | None = None) -> Plan:
    comfyui_dir = Path(comfyui_dir).resolve()
    if not (comfyui_dir / "main.py").is_file():
        raise PlanError(f"{comfyui_dir} has no main.py: --comfyui-dir must be a ComfyUI folder")
    if not 1 <= base_port <= 65535 - (len(gpus) - 1):
        raise PlanError(f"--base-port {base_port}: ports {base_port}..{base_port + len(gpus) - 1} "
                        "must lie within 1..65535")
    forbidden = {"--cuda-device", "--port", "--listen", "--user-directory", "--output-directory",
                 "--temp-directory", "--database-url", "--base-directory"}
    for arg in comfyui_args:
        if arg.split("=", 1)[0] in forbidden:
            raise PlanError(f"{arg.split('=', 1)[0]} is set by multi-gpu; leave it out of --comfyui-arg")
    state = Path(state_dir).resolve() if state_dir else Path.cwd().resolve() / DEFAULT_STATE
    instances = tuple(Instance(gpu, base_port + index, state / f"gpu{gpu}", runs_bot=index == 0)
                      for index, gpu in enumerate(gpus))
    base = Path(base_directory).resolve() if base_directory else None
    if base is not None and not base.is_dir():
        raise PlanError(f"--base-directory {base} is not a folder")
    return Plan(comfyui_dir, python or comfyui_python(comfyui_dir), listen, instances, tuple(comfyui_args), base)


def _env_words(env: dict[str, str | None]) -> list[str]:
    words = []
    for name, value in env.items():
        words += ["-u", name] if value is None else [f"{name}={value}"]
    return words


def script(plan: Plan) -> str:
    """A bash script that starts every instance, logs each to its state folder, and stops them all
    on Ctrl-C or SIGTERM.

    A process a script starts with ``&`` ignores SIGINT (bash sets that for background jobs
    without job control, and Python then installs no handler), so Ctrl-C would stop nothing:
    the script sends SIGTERM (ComfyUI ends; the pack's PostgreSQL and anon stop with it, as
    after any kill), then SIGKILL to any instance still running after ``stop_grace_s``.
    """
    q = shlex.quote
    lines = [
        "#!/usr/bin/env bash",
        "# One ComfyUI per GPU, written by `python <comfyui-courier> multi-gpu`; see README, 'Several GPUs'.",
        f"# The bot runs in the first instance; its COURIER_BACKENDS={plan.backends}",
        "set -euo pipefail",
        ': "${COURIER_DATABASE_URL:?set COURIER_DATABASE_URL: every instance shares one PostgreSQL}"',
        'export COURIER_DATABASE_URL',
        'if [ -z "${TELEGRAM_BOT_TOKEN:-}" ]; then echo "TELEGRAM_BOT_TOKEN is not set: no bot will start" >&2; fi',
        "mkdir -p " + " ".join(q(str(d)) for i in plan.instances for d in (i.user_dir, i.output_dir)),
        "pids=()",
        ("running() { local pid; for pid in ${pids[@]+\"${pids[@]}\"}; do kill -0 \"$pid\" 2>/dev/null && return 0;"
         " done; return 1; }"),
        "stop() {",
        "  trap '' INT TERM",
        '  kill -TERM ${pids[@]+"${pids[@]}"} 2>/dev/null || true',
        f"  for ((tenths = 0; tenths < {plan.stop_grace_s * 10}; tenths++)); do running || break; sleep 0.1; done",
        '  kill -KILL ${pids[@]+"${pids[@]}"} 2>/dev/null || true',
        "  wait",
        "  exit 0",
        "}",
        "trap stop INT TERM",
    ]
    for instance in plan.instances:
        role = "the bot + GPU" if instance.runs_bot else "GPU"
        words = ["env", *_env_words(plan.environment(instance)), *plan.command(instance)]
        lines.append(f"# {role} {instance.gpu}: {plan.url(instance)}")
        lines.append(" ".join(q(w) for w in words) + f" >>{q(str(instance.log_file))} 2>&1 &")
        lines.append("pids+=($!)")
        lines.append(f"echo {q(f'GPU {instance.gpu}: {plan.url(instance)} (log: {instance.log_file})')}")
    lines.append("wait")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python <comfyui-courier folder> multi-gpu",
        description="Write (or print) a script that runs one ComfyUI per GPU, all backends of one bot.")
    parser.add_argument("--comfyui-dir", type=Path, required=True, help="the ComfyUI folder (main.py)")
    parser.add_argument("--gpus", help="CUDA device numbers, e.g. 0,1 (default: every GPU nvidia-smi lists)")
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT,
                        help=f"port of the first instance; the next ones count up (default {DEFAULT_BASE_PORT})")
    parser.add_argument("--listen", default="127.0.0.1", help="address each ComfyUI listens on (default 127.0.0.1)")
    parser.add_argument("--state-dir", type=Path,
                        help=f"where each instance's user/output/temp folders go (default ./{DEFAULT_STATE})")
    parser.add_argument("--base-directory", type=Path,
                        help="ComfyUI's --base-directory (models, custom_nodes, input), shared by every instance")
    parser.add_argument("--python", help="the interpreter that runs ComfyUI (default: its .venv, else this one)")
    parser.add_argument("--comfyui-arg", action="append", default=[], metavar="ARG",
                        help="one more ComfyUI argument for every instance, e.g. --comfyui-arg=--highvram")
    parser.add_argument("--script", type=Path, default=Path(DEFAULT_SCRIPT),
                        help=f"the script to write (default ./{DEFAULT_SCRIPT})")
    parser.add_argument("--print", action="store_true", help="print the script instead of writing it")
    args = parser.parse_args(argv)
    try:
        gpus = parse_gpus(args.gpus) if args.gpus is not None else detect_gpus()
        if not gpus:
            raise PlanError("no GPU found (nvidia-smi lists none): name them with --gpus 0,1")
        plan = make_plan(args.comfyui_dir, gpus, base_port=args.base_port, state_dir=args.state_dir,
                         listen=args.listen, python=args.python, comfyui_args=tuple(args.comfyui_arg),
                         base_directory=args.base_directory)
    except PlanError as exc:
        parser.error(str(exc))
    text = script(plan)
    if args.print:
        sys.stdout.write(text)
        return 0
    args.script.write_text(text, encoding="utf-8")
    args.script.chmod(0o755)
    print(f"wrote {args.script}: {len(plan.instances)} ComfyUI instance(s), GPUs "
          f"{', '.join(str(i.gpu) for i in plan.instances)}")
    path = str(args.script) if "/" in str(args.script) else f"./{args.script}"
    print(f"start it with: COURIER_DATABASE_URL=postgresql://… TELEGRAM_BOT_TOKEN=… {shlex.quote(path)}")
    print(f"COURIER_BACKENDS={plan.backends}")
    return 0
