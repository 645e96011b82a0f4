"""Shell commands: what they would run, and a sandbox to run them in.

- ``parse``: ``analyse``: a command line reduced to its simple commands (``ShellAnalysis``).
- ``words``: the analyser's values (``Word``, ``SimpleCommand``) and its table of wrappers.
- ``sandbox``: ``Sandbox``: ``bash`` under bubblewrap where the machine allows it.
- ``environment``: ``CommandEnv``: the environment of commands, jobs, hooks and MCP servers.
"""

__all__ = ["environment", "parse", "sandbox", "words"]
