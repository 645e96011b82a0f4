"""``teamctl scenario list|run``: runnable scripted team scenarios
(docs/ARCHITECTURE.md, "Scenarios").

``run NAME`` copies the fixture into a fresh temporary git repository, runs the real runtime with
the scenario's scripted model (``--via-api``: through the local fake Messages API and the real
``anthropic`` SDK), checks every expectation and prints a report. Exit codes: 0 passed (or
skipped, with the reason printed), 1 an expectation failed or the scenario file is invalid.
NAME is a bundled scenario or the path of a scenario folder.
"""

from __future__ import annotations

import sys

import click

from actors.cli.common import echo_json, json_option, show

EXIT_PASSED, EXIT_FAILED = 0, 1


@click.group("scenario")
def scenario_group() -> None:
    """Scripted team scenarios: list them, run one and check its expectations."""


@scenario_group.command("list")
@json_option
def list_command(as_json: bool) -> None:
    """The bundled scenarios and whether this runtime can run them."""
    from actors.scenarios.model import list_scenarios
    from actors.scenarios.report import render_list
    from actors.scenarios.run import capabilities

    scenarios = list_scenarios()
    have = capabilities()
    missing = {
        s.name: "needs " + ", ".join(sorted(set(s.requires) - have))
        for s in scenarios
        if set(s.requires) - have
    }
    if as_json:
        echo_json(
            [
                {
                    "name": s.name,
                    "description": s.description,
                    "requires": list(s.requires),
                    "runnable": s.name not in missing,
                }
                for s in scenarios
            ]
        )
        return
    show(render_list(scenarios, missing))


@scenario_group.command("run")
@click.argument("name")
@click.option("--via-api", is_flag=True, help="Go through the fake Messages API and the SDK.")
@click.option("--keep", is_flag=True, help="Keep the repository and print its path.")
@click.option("--timeout", type=float, default=None, help="Override the scenario's time limit.")
@json_option
def run_command(name: str, via_api: bool, keep: bool, timeout: float | None, as_json: bool) -> None:
    """Run scenario NAME and check every expectation (exit 1 if one fails)."""
    from actors.scenarios.model import find_scenario
    from actors.scenarios.report import render_result
    from actors.scenarios.run import run_scenario

    scenario = find_scenario(name)
    if not as_json:
        mode = " through the fake Messages API" if via_api else ""
        click.echo(f"running {scenario.name}{mode}...", err=True)
    result = run_scenario(scenario, via_api=via_api, keep=keep, timeout_s=timeout)
    if as_json:
        echo_json(result.as_json())
    else:
        show(render_result(result))
    sys.exit(EXIT_PASSED if result.ok or result.skipped else EXIT_FAILED)


COMMANDS = (scenario_group,)
