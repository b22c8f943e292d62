#!/usr/bin/env bash
# Developer check, not part of CI: read every .ini file of an NNTrainer git
# repository with iniparser 4.1 (needs libiniparser-dev) and with nntrainer's
# own reader, and report where they disagree (tools/ini_diff.c).
#
#   scripts/ini-diff.sh NNTRAINER_GIT_DIR [REV]   the .ini files at REV (HEAD)
#   scripts/ini-diff.sh --random N [SEED]          N generated files
#
# NNTRAINER_GIT_DIR may be a bare repository. Exit status 1 means a file
# both readers accept reads differently, which is a bug in ours.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -I"$here" "$here/tools/ini_diff.c" \
  "$here/nntrainer/ini_read.c" "$here/nntrainer/common.c" -liniparser -lm -o "$work/ini_diff"

if [ "${1:-}" = "--random" ]; then
  shift
  exec "$work/ini_diff" --random "$@"
fi
repo=${1:?usage: scripts/ini-diff.sh NNTRAINER_GIT_DIR [REV] | --random N [SEED]}
rev=${2:-HEAD}
files=()
while IFS= read -r path; do
  out="$work/files/$path"
  mkdir -p "$(dirname "$out")"
  git -C "$repo" show "$rev:$path" >"$out"
  files+=("$out")
done < <(git -C "$repo" ls-tree -r --name-only "$rev" | grep -i '\.ini$')
cd "$work/files"
"$work/ini_diff" "${files[@]#"$work/files/"}"
