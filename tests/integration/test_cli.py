"""The real binary's command line: --help of every command is help (no token minted for a user
named --help), options combine (--config FILE --log-level debug runs the daemon at that level),
usage errors exit 2, and the completion scripts it prints load in bash and zsh."""

import socket
import subprocess

import pytest

import pgwtest


def _run(binary, *args, input=None):
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=30,
                          input=input)


@pytest.mark.parametrize("command", [[], ["passwd"], ["token"], ["report"], ["completion"]])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_of_every_command(pgwarden_bin, command, flag):
    r = _run(pgwarden_bin, *command, flag, input="")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("pgwarden") or "Usage: pgwarden" in r.stdout, r.stdout
    assert ("pgwarden " + " ".join(command)).strip() in r.stdout, r.stdout
    assert "token: pgw_" not in r.stdout and "SCRAM-SHA-256$" not in r.stdout, r.stdout


def test_usage_errors_exit_2_and_say_why(pgwarden_bin):
    for args in (["--frobnicate"], ["token"], ["token", "a", "b"], ["--log-level", "debug"],
                 ["--config", "x.yaml", "token", "agent"], ["report", "bogus"], []):
        r = _run(pgwarden_bin, *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("pgwarden: "), (args, r.stderr)
        assert "token: pgw_" not in r.stdout


def test_config_and_log_level_combine(pgwarden_factory, pg):
    daemon = pgwarden_factory.start(pg, start=False)
    daemon.config["logging"] = {"level": "info"}
    daemon.write_config()
    # Pgwarden.start runs `--config FILE`; here with --log-level after it.
    original = daemon.binary
    wrapper = daemon.dir / "pgwarden-debug"
    wrapper.write_text(f'#!/bin/sh\nexec "{original}" "$@" --log-level debug\n')
    wrapper.chmod(0o755)
    daemon.binary = str(wrapper)
    daemon.start()
    # A connection closed before its startup packet is logged at debug level only.
    socket.create_connection(("127.0.0.1", daemon.port), timeout=5).close()
    assert pgwtest.wait_for(lambda: "[debug]" in daemon.log() and "closed before startup"
                            in daemon.log()), daemon.log()[-2000:]
    assert daemon.stop(by_test=True) == 0


def test_completion_scripts_load(pgwarden_bin, tmp_path):
    bash = _run(pgwarden_bin, "completion", "bash")
    assert bash.returncode == 0
    script = tmp_path / "pgwarden.bash"
    script.write_text(bash.stdout)
    # Loaded into bash, it completes subcommands, report kinds and --log-level's values.
    probe = (f'source {script}\n'
             'COMP_WORDS=(pgwarden re); COMP_CWORD=1; _pgwarden; echo "${COMPREPLY[*]}"\n'
             'COMP_WORDS=(pgwarden report r); COMP_CWORD=2; _pgwarden; echo "${COMPREPLY[*]}"\n'
             'COMP_WORDS=(pgwarden --config x --log-level d); COMP_CWORD=4; _pgwarden; '
             'echo "${COMPREPLY[*]}"\n')
    r = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["report", "retries repeats", "debug"], r.stdout
    zsh = _run(pgwarden_bin, "completion", "zsh")
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef pgwarden\n")
    # zsh (scripts/deps test installs it) parses it.
    z = subprocess.run(["zsh", "-n", "-c", zsh.stdout], capture_output=True, text=True, timeout=30)
    assert z.returncode == 0, z.stderr
