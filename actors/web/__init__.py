"""The web dashboard: ``teamctl web`` serves a live view of the team and a JSON API
(README.md, "Web dashboard"). Optional: ``pip install 'teamctl[web]'`` (Starlette, uvicorn,
sse-starlette), imported only by the modules that serve."""
