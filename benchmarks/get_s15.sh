#!/bin/sh
# Downloads learn-claude-code's s15 (agents/s15_agent_teams.py, the agents/anthropic_client.py it
# imports, and the project's MIT LICENSE) at a pinned commit into benchmarks/baselines/s15/, the
# baseline of benchmarks/bench_drain_s15.py. That folder is git-ignored: the code is not ours and
# stays out of this repository.
#
#     sh benchmarks/get_s15.sh [DEST]      (S15_BASE_URL overrides where the files come from)
set -eu
COMMIT=151844d6e09686ff77bc18f8161fca3a2e7a6a07
BASE=${S15_BASE_URL:-"https://raw.githubusercontent.com/shareAI-lab/learn-claude-code/$COMMIT"}
DEST=${1:-"$(dirname "$0")/baselines/s15"}
mkdir -p "$DEST/agents"
for file in LICENSE agents/s15_agent_teams.py agents/anthropic_client.py; do
    curl -fsSL --retry 2 -o "$DEST/$file.part" "$BASE/$file"
    mv "$DEST/$file.part" "$DEST/$file"
done
printf 'learn-claude-code s15 at %s in %s\n' "$COMMIT" "$DEST"
