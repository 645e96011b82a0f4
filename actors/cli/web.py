"""``teamctl web``: the team in a browser (actors/web/; README.md, "Web dashboard")."""

from __future__ import annotations

import click

from actors.cli.approvals import HUMAN


@click.command("web")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="0: any free."
)
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
@click.option(
    "--as", "who", default=HUMAN, show_default=True, help="Who answers approvals (recorded)."
)
def web(host: str, port: int, no_open: bool, who: str) -> None:
    """Serve a live dashboard of the team; prints its URL (with an access token) first."""
    try:
        import sse_starlette  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise click.ClickException(
            "teamctl web needs the web extra: pip install 'teamctl[web]'"
        ) from None
    from actors.live.load import LiveSource
    from actors.web.server import serve
    from actors.web.state import Dashboard
    from mailboxes.messages import check_agent_name

    check_agent_name(who)
    dashboard = Dashboard(LiveSource.open(), human=who)
    try:
        serve(dashboard, host=host, port=port, open_browser=not no_open)
    finally:
        dashboard.close()


COMMANDS = (web,)
