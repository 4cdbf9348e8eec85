"""holctl's commands about the service: the settings a daemon would use, the systemd user units, the skill."""

from __future__ import annotations

import os
from pathlib import Path

import click

from holctl.calls import EXIT_CODES, Target
from holsrv.errors import HolsrvError
from holsrv.rpc import client, messages


@click.command("config", epilog=EXIT_CODES)
@click.argument("script", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def config(target: Target, script: Path | None) -> None:
    """Print the settings a daemon started now would use, where each comes from, and the running daemon's.

    With SCRIPT: the settings its HOL server would run with, its project file (the nearest
    holsrv.toml above it) over the user-wide ones."""
    from holsrv.config import settings as holsrv_settings

    file = holsrv_settings.config_path()
    click.echo(f"config file: {file} ({'found' if file and file.is_file() else 'none there'})")
    try:
        ours = holsrv_settings.Settings.from_env()
    except holsrv_settings.ConfigError as err:
        raise click.ClickException(f"a daemon would not start: {err}") from None
    for warning in ours.warnings:
        click.echo(f"warning: {warning}")
    if script is not None:
        _for_script(ours, script.absolute())
        return
    effective = ours.effective()
    click.echo("a daemon started now (flags aside) would use (config key = value  source, environment name):")
    for name, value, source in effective:  # a constant has no environment name to offer
        click.echo(_setting_line(name, value, "fixed: a constant" if source == holsrv_settings.FIXED
                                 else f"{source}, {name}"))
    try:
        with client.connect(target.socket, name="holctl", autostart=False) as conn:
            status = conn.call(messages.Status())
    except HolsrvError:
        click.echo("no daemon is running; the next holctl or holmcp call starts one with these settings "
                   "(and, started so, idle_exit_s 3600 unless set)")
        return
    assert isinstance(status, messages.StatusResult)
    shown = {name: value for name, value, _ in effective}
    differ = [s for s in status.settings if shown.get(s.name) != s.value]
    if not differ:
        click.echo(f"the running daemon (pid {status.pid}) uses the same values")
        return
    click.echo(f"the running daemon (pid {status.pid}) differs in (`holctl shutdown`, and the next call starts one "
               "with the above):")
    for setting in differ:
        click.echo(_setting_line(setting.name, setting.value, setting.source))


def _for_script(ours, script: Path) -> None:
    """`holctl config SCRIPT`: every setting of the script's server and where it came from, the
    project file first, then the user-wide sources (docs/settings.md#projects)."""
    from holsrv.config import projects
    from holsrv.config.settings import FIXED

    project = projects.Projects().of(script)
    if project is None:
        click.echo(f"project file: none ({projects.PROJECT_NAME} in {script.parent} or above, up to the repository "
                   "root; not in your home)")
    elif project.error:
        raise click.ClickException(f"the daemon refuses calls about {script.name}: {project.error}")
    else:
        click.echo(f"project file: {project.file} (sets {', '.join(project.values) or 'nothing'})")
    settings = project.apply(ours) if project is not None else ours
    try:
        hol = settings.hol_command()
    except HolsrvError as err:
        hol = f"not found: {err}"
    click.echo(f"HOL for {script.name}: {hol}")
    click.echo("its HOL server would use (config key = value  source; a project file's over the environment, "
               "the config file and the defaults; only a call's own option over it):")
    for name, value, source in settings.effective():
        if source != FIXED:
            click.echo(_setting_line(name, value, source))


def _setting_line(name: str, value: str, source: str) -> str:
    return f"  {name.removeprefix('HOLSRV_').lower():<22} = {value or '(none)':<12}  {source}"


@click.command("install-service")
def install_service() -> None:
    """Install holsrv as a systemd user service, started on the first connection to its socket
    (on macOS: a launchd LaunchAgent, kept running from login)."""
    from holctl import launchd, service
    from holsrv import facilities
    from holsrv.config.settings import ConfigError, Settings

    manager = facilities.service_manager()
    if manager == "none":
        raise click.ClickException(f"this system has neither systemd nor launchd: nothing was installed. "
                                   f"{service.ON_DEMAND}")
    try:
        stop_timeout_s = Settings.from_env().stop_timeout_s
    except ConfigError as err:
        raise click.ClickException(f"fix the settings first, or the service would not start: {err}") from None
    the = launchd if manager == "launchd" else service
    if not the.installed():
        _stop_on_demand_daemon()
    try:
        the.install(os.environ, stop_timeout_s, click.echo)
    except (service.ServiceError, HolsrvError, OSError) as err:
        raise click.ClickException(str(err)) from None


@click.command("uninstall-service")
def uninstall_service() -> None:
    """Stop and remove the systemd user units (on macOS: the LaunchAgent) install-service wrote."""
    from holctl import launchd, service
    from holsrv import facilities

    the = launchd if facilities.service_manager() == "launchd" else service
    try:
        the.uninstall(os.environ, click.echo)
    except (service.ServiceError, OSError) as err:
        raise click.ClickException(str(err)) from None


def _stop_on_demand_daemon() -> None:
    """Ask a daemon already on the socket to stop, so the one systemd starts can take it over."""
    try:
        with client.connect(None, name="holctl", autostart=False) as conn:
            reply = conn.call(messages.Shutdown())
    except HolsrvError:
        return  # none running
    assert isinstance(reply, messages.ShutdownResult)
    click.echo(f"asked the running daemon to stop: {reply.message}")


@click.command("install-skill")
@click.option("--host", type=click.Choice(["claude", "codex", "opencode"]), default="claude", show_default=True,
              help="The agent host whose skills directory gets the skill.")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The skills directory to copy into instead of the host's (e.g. a project's .claude/skills).")
@click.option("--force", is_flag=True, help="Replace files of the skill that are there with other text.")
def install_skill(host: str, directory: Path | None, force: bool) -> None:
    """Copy the HOL4 proof skill (hol4-proof) into an agent host's skills directory.

    Claude Code's is ~/.claude/skills, Codex's ~/.agents/skills, OpenCode's
    ~/.config/opencode/skills. A file there with other text is kept unless --force.
    """
    from holctl import skillcopy
    from holmcp import skill

    the = skill.skill()
    try:
        lines = skillcopy.install(the.name, the.files, directory or skillcopy.skills_dir(host), force)
    except (skillcopy.SkillError, OSError) as err:
        raise click.ClickException(str(err)) from None
    for line in lines:
        click.echo(line)


COMMANDS = [config, install_service, uninstall_service, install_skill]
