#!/usr/bin/env bash
# The launcher's folders may include only what launcher/CMakeLists.txt lets them link: every
# "launcher/<folder>/..." include of a file in launcher/<folder> is checked against the table
# below (and launcher/, the agent, may include them all). Also: no libaccel, config or probes
# file includes the launcher, and no header of the tree has a `using` declaration at namespace
# scope, and no code linked with LibTorch calls std::filesystem::remove_all (pip's LibTorch
# exports a broken copy: libaccel/common/remove_tree.h). Prints each offence as file:line and
# exits 1 if there is one.
#   tests/launcher/layering.sh [REPO]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
declare -A allowed=(
  [base]="base"
  [plan]="base plan"
  [cli]="base plan cli"
  [report]="base plan report"
  [rendezvous]="base plan report rendezvous"
  [supervise]="base plan report rendezvous supervise"
)
bad=0
for folder in "${!allowed[@]}"; do
  while IFS=: read -r file line text; do
    used=$(sed -E 's|.*"launcher/([a-z_]+)/.*|\1|' <<<"$text")
    if [[ " ${allowed[$folder]} " != *" $used "* ]]; then
      echo "$file:$line: launcher/$folder may not include launcher/$used ($text)"
      bad=1
    fi
  done < <(grep -rn '#include "launcher/[a-z_]*/' "launcher/$folder" || true)
  # A header directly in launcher/ (the agent) is above every folder.
  if grep -rn '#include "launcher/[a-z_]*\.h"' "launcher/$folder"; then bad=1; fi
done
if grep -rn '#include "launcher/' libaccel config probes; then
  echo "libaccel, config and probes never include the launcher"
  bad=1
fi
if grep -rnE '^using [a-zA-Z_:]+;|^using namespace' --include=*.h apps config launcher libaccel probes; then
  echo "headers declare no \`using\` at namespace scope"
  bad=1
fi
# Code that links LibTorch: libaccel, its tests and examples (the launcher never links it).
if grep -rn 'remove_all *(' --include=*.cc --include=*.h libaccel apps/examples tests/libaccel \
  tests/gpu; then
  echo "code linked with LibTorch removes trees with accel::removeTree, not remove_all"
  bad=1
fi
((bad == 0)) && echo "layering: launcher folders include only what they may"
exit $bad
