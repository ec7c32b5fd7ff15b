#!/usr/bin/env bash
# Fails when gen/ does not match what `npm run generate` produces from proto/ (stale or
# hand-edited generated code). It regenerates into the working tree, so run it on a clean
# checkout (CI) or after committing your own changes to gen/.
set -euo pipefail
cd "$(dirname "$0")/.."

npm run --silent generate

changes="$(git status --porcelain --untracked-files=all -- gen/)"
if [ -n "$changes" ]; then
  echo "error: the generated code in gen/ is stale or was edited by hand." >&2
  echo "       Run \`npm run generate\` and commit gen/. Differences:" >&2
  echo "$changes" | sed 's/^/         /' >&2
  git --no-pager diff --stat -- gen/ >&2 || true
  exit 1
fi
echo "gen/ is up to date with proto/"
