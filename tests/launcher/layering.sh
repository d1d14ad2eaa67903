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
  [store]="store"
  [plan]="base plan store"
  [cli]="base plan cli"
  [report]="base plan report"
  [rendezvous]="base plan report rendezvous store"
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
# Inside rendezvous/: the round's core (round/) is backend-free — no store, etcd or transport;
# the shared files (rendezvous/*.h, *.cc) include neither backend; c10d/ and etcd/ never include
# each other; etcd/client/ (HTTP, TLS, the v3 gateway) knows nothing of rounds.
R=launcher/rendezvous
if grep -rnE '#include "(launcher/rendezvous/(c10d|etcd|[a-z_]+\.h)|launcher/store/|libaccel/store/|probes/)' "$R/round"; then
  echo "$R/round/ (the round's core) includes no backend, store, transport or shared file"
  bad=1
fi
if grep -nE '#include "launcher/rendezvous/(c10d|etcd)/' "$R"/*.h "$R"/*.cc; then
  echo "$R/*: the files the backends share include neither backend"
  bad=1
fi
if grep -rn '#include "launcher/rendezvous/etcd/' "$R/c10d" || grep -rn '#include "launcher/rendezvous/c10d/' "$R/etcd"; then
  echo "$R/c10d/ and $R/etcd/ never include each other"
  bad=1
fi
if grep -rn '#include "launcher/' "$R/etcd/client" | grep -vE '"launcher/(base/|rendezvous/etcd/(api\.h|client/))'; then
  echo "$R/etcd/client/ includes only launcher/base, etcd/api.h and itself"
  bad=1
fi
# The header that declares the restart rule compiles against at most 4 project headers.
if command -v "${CXX:-g++}" >/dev/null; then
  deps=$(echo '#include "launcher/rendezvous/round/rules.h"' |
    "${CXX:-g++}" -std=c++17 -I. -Ilibaccel/include -x c++ -M - 2>/dev/null |
    tr ' \\' '\n\n' | grep -cE '^(launcher|libaccel|config|probes)/' || true)
  if ((deps == 0 || deps > 5)); then  # 5: rules.h itself and at most 4 more
    echo "$R/round/rules.h compiles against $((deps - 1)) project headers (at most 4)"
    bad=1
  fi
fi
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
