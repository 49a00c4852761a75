"""Docker does not run here, so the Procfile, docker-compose.yml and Dockerfile are checked by reading them:
every command names an entry point that exists and options it accepts, and every WEBHOOKS_* variable is a setting."""

from __future__ import annotations

import json
import re
import shlex
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml
from celery.bin.base import CLIContext
from celery.bin.celery import celery as celery_cli
from flower.options import options as flower_options
from gunicorn.config import Config as GunicornConfig

import webhooks
from webhooks.ops.cli import main
from webhooks.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PROCFILE = ROOT / "Procfile"
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"


def procfile() -> dict[str, str]:
    """Process name -> command, as honcho and Heroku read it (other lines are comments)."""
    entries = re.findall(r"^([A-Za-z0-9_-]+):\s*(.+)$", PROCFILE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(entries)


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def expand(command: str) -> str:
    """Stand-in values for ${NAME:-default}, ${NAME:?message}, ${NAME} and $NAME, as a shell would give them."""
    command = re.sub(r"\$\{(\w+):-([^}]*)\}", r"\2", command)
    command = re.sub(r"\$\{(\w+)(:\?[^}]*)?\}", r"value-of-\1", command)
    return re.sub(r"\$\$?(\w+)", r"value-of-\1", command)


def check_command(argv: list[str]) -> None:
    """Fail unless ``argv`` runs one of our entry points with options it accepts."""
    program, *args = argv
    if program == "celery":
        assert args[:2] in (["-A", "webhooks"], ["--app", "webhooks"]), f"{argv}: celery must be given -A webhooks"
        assert {"webhooks.fanout_many", "webhooks.deliver"} <= set(webhooks.app.tasks)
        name, *rest = args[2:]
        assert name in celery_cli.commands, f"{argv}: celery has no command {name!r}"
        context = celery_cli.commands[name].make_context(name, rest, obj=CLIContext(webhooks.app, True, None))
        for option in context.params.get("tornado_argv", ()):  # flower passes its options on to tornado
            assert option.startswith("--") and option[2:].split("=")[0] in flower_options, f"{argv}: {option}"
    elif program == "webhooks":
        assert args[0] in main.commands, f"{argv}: webhooks has no command {args[0]!r}"
        main.commands[args[0]].make_context(args[0], args[1:])
    elif program == "gunicorn":
        parsed = GunicornConfig().parser().parse_args(args)  # exits (SystemExit) on an unknown option
        module, _, factory = parsed.args[0].partition(":")
        assert module.split(".")[0] == "webhooks", f"{argv} does not run an entry point of this package"
        assert callable(getattr(import_module(module), factory.removesuffix("()"), None)), f"{argv}: no {factory}"
    elif program == "nice":  # a lower CPU priority (the bulk lane's workers)
        assert args[0] == "-n" and args[1].isdigit(), f"{argv}: nice -n N, then the command"
        check_command(args[2:])
    elif program in ("python", "python3") and args[0] == "-m":
        assert find_spec(args[1]) is not None, f"{argv}: no module {args[1]!r}"
    elif program in ("python", "python3") and args[0] == "-c":
        compile(args[1], "<healthcheck>", "exec")
    else:
        raise AssertionError(f"{argv} does not run an entry point of this package")


def shell_argv(command: str) -> list[str]:
    return shlex.split(expand(command))


def healthcheck_argv(test: list[str]) -> list[str]:
    kind, *rest = test
    return shell_argv(rest[0]) if kind == "CMD-SHELL" else [expand(part) for part in rest]


def our_services() -> dict[str, dict]:
    """Services built from our Dockerfile (redis runs its own image)."""
    return {name: service for name, service in compose()["services"].items() if "build" in service}


def test_procfile_has_worker_flower_and_web_and_each_command_runs_an_entry_point():
    processes = procfile()
    assert {"worker", "flower", "web"} <= processes.keys()
    for command in processes.values():
        check_command(shell_argv(command))


def test_the_worker_pool_comes_from_the_settings_and_flower_requires_basic_auth():
    processes = procfile()
    for worker in (shell_argv(processes["worker"]), our_services()["worker"]["command"]):
        # Celery ignores `--pool prefork` once the app sets a pool, so a flag here would mislead.
        assert "--pool" not in worker and "--concurrency" not in worker
    assert '--basic-auth="${FLOWER_BASIC_AUTH:?' in processes["flower"]


@pytest.mark.parametrize("name", sorted(our_services()))
def test_compose_commands_and_healthchecks_run_entry_points(name):
    service = our_services()[name]
    command = service["command"]
    check_command([expand(part) for part in command] if isinstance(command, list) else shell_argv(command))
    check_command(healthcheck_argv(service["healthcheck"]["test"]))


def test_compose_redis_keeps_an_append_only_file_on_a_volume():
    redis = compose()["services"]["redis"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_compose_worker_scales_and_everything_waits_for_a_healthy_redis():
    services = compose()["services"]
    assert {"redis", "worker", "flower", "web"} <= services.keys()
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker, "--scale worker=N needs neither"
    for name, service in our_services().items():
        assert service["depends_on"]["redis"]["condition"] == "service_healthy", name
        assert "healthcheck" in service, name
    assert any("--basic-auth=${FLOWER_BASIC_AUTH:?" in part for part in services["flower"]["command"])


def test_compose_publishes_flower_and_the_settings_page_on_loopback_only():
    assert compose()["services"]["flower"]["ports"] == ["127.0.0.1:${FLOWER_PORT:-5555}:5555"]
    assert [expand(port) for port in compose()["services"]["web"]["ports"]] == ["127.0.0.1:8000:8000"]


def test_the_procfiles_settings_page_listens_on_loopback_unless_told_otherwise():
    # Reached directly, with WEBHOOKS_TRUSTED_PROXIES set, any client could pick its own X-Forwarded-For.
    web = shell_argv(procfile()["web"])
    assert web[web.index("--bind") + 1] == "127.0.0.1:8000"
    assert "${WEB_ADDRESS:-127.0.0.1}" in procfile()["web"]


def test_a_workers_metrics_listen_on_every_interface_only_inside_compose():
    assert compose()["services"]["worker"]["environment"]["WEBHOOKS_METRICS_ADDRESS"] == "0.0.0.0"
    assert Settings.model_fields["metrics_address"].default == "127.0.0.1"


def test_every_webhooks_variable_set_anywhere_is_a_setting():
    fields = {f"WEBHOOKS_{name.upper()}" for name in Settings.model_fields}
    environment = {key for service in our_services().values() for key in service.get("environment", {})}
    assert environment and environment <= fields, environment - fields
    mentioned = set()
    for path in (PROCFILE, COMPOSE, DOCKERFILE):
        mentioned |= set(re.findall(r"\bWEBHOOKS_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    assert mentioned <= fields, mentioned - fields


def test_the_dockerfile_installs_the_package_and_runs_an_entry_point():
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert 'RUN pip install ".${EXTRAS:+[$EXTRAS]}"' in text  # the base install, or with a service's extras
    (cmd,) = re.findall(r"^CMD (\[.*\])$", text, flags=re.MULTILINE)
    check_command(json.loads(cmd))
    assert re.search(r"^USER (?!root)\w+", text, flags=re.MULTILINE), "the image runs as a non-root user"


def test_each_compose_service_installs_the_extras_its_command_needs():
    services = compose()["services"]
    builds = {name: service.get("build") for name, service in services.items()}
    extras = {
        name: build.get("args", {}).get("EXTRAS") if isinstance(build, dict) else None for name, build in builds.items()
    }
    assert extras == {"redis": None, "worker": None, "bulk": None, "flower": "flower", "web": "web"}
    assert services["worker"]["environment"]["WEBHOOKS_METRICS_PORT"] == 9100
    assert services["bulk"]["environment"]["WEBHOOKS_METRICS_PORT"] == 9100


def test_the_lanes_each_have_their_workers_in_the_procfile_and_in_compose():
    """README's Lanes: single events on Celery's default queue, batches on the bulk lane at a lower priority."""
    lanes = {name: shell_argv(command) for name, command in procfile().items() if name in ("worker", "bulk")}
    lanes |= {f"compose {name}": compose()["services"][name]["command"] for name in ("worker", "bulk")}
    for name, argv in lanes.items():
        queues = argv[argv.index("-Q") + 1]
        assert queues == ("webhooks.bulk" if name.endswith("bulk") else "celery"), (name, argv)
        assert (argv[0] == "nice") == name.endswith("bulk"), (name, argv)


def test_the_checker_catches_mistakes():
    with pytest.raises(AssertionError, match="no command 'wroker'"):
        check_command(["celery", "-A", "webhooks", "wroker"])
    with pytest.raises(Exception, match="--concurency"):
        check_command(["celery", "-A", "webhooks", "worker", "--concurency", "4"])
    with pytest.raises(AssertionError, match="--prot"):
        check_command(["celery", "-A", "webhooks", "flower", "--prot=5555"])
    with pytest.raises(AssertionError, match="no command 'srve'"):
        check_command(["webhooks", "srve"])
    with pytest.raises(SystemExit):
        check_command(["gunicorn", "webhooks.ops.web:create_app()", "--wrokers", "2"])
    with pytest.raises(AssertionError, match="no create_ap"):
        check_command(["gunicorn", "webhooks.ops.web:create_ap()"])
    with pytest.raises(AssertionError, match="no module"):
        check_command(["python", "-m", "webhooks.nothing_here"])
    with pytest.raises(AssertionError, match="does not run an entry point"):
        check_command(["gunicorn", "app:app"])


@pytest.mark.parametrize("script", ["demo", "test"])
def test_the_scripts_say_what_they_do_before_each_slow_step(script):
    lines = (ROOT / "scripts" / script).read_text(encoding="utf-8").splitlines()
    slow = [number for number, line in enumerate(lines) if re.match(r"\s*\S+ -m (venv|pip install .*-e '\.\[)", line)]
    assert len(slow) == 2, slow
    for number in slow:
        before = " ".join(lines[max(0, number - 2) : number])
        assert re.search(r"(echo|say) \"[^\"]*(creating|installing)", before), (script, lines[number])
