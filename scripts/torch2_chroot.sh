#!/usr/bin/env bash
# A real torch 2.x on Debian 12: Debian trixie (python3-torch 2.6, libtorch-dev 2.6) in a chroot.
#
#   scripts/torch2_chroot.sh [--cuda] ensure          build the chroot if it is missing or stale (idempotent)
#   scripts/torch2_chroot.sh [--cuda] path            print its directory (exit 1 if it is not built)
#   scripts/torch2_chroot.sh [--cuda] check           exit 0 if usable here, else 77 and the reason on stderr
#   scripts/torch2_chroot.sh [--cuda] run CMD [ARG]…  run CMD inside it, in the current directory
#
# --cuda: another chroot, trixie's CUDA build of the same LibTorch 2.6 (libtorch-cuda-dev, from
# `contrib`), NCCL 2.22 (libnccl-dev) and the CUDA 12.4 toolkit (nvidia-cuda-toolkit, `non-free`),
# to compile and link libaccel's GPU path here (scripts/cuda_build.sh). libtorch-cuda-2.6 depends
# on nvidia-cudnn, which in Debian is an installer that downloads cuDNN from NVIDIA at install
# time and cannot work here; a local placeholder package of that name (built with equivs, its
# description says what it is) satisfies the dependency, and nothing provides libcudnn.so.9:
# programs linked against libtorch_cuda link (with --allow-shlib-undefined) but cannot start in
# this chroot. It compiles and links the GPU path; running it needs a machine with a GPU.
#
# The chroot is made once with debootstrap from the mirror apt already uses and cached under
# ${ACCEL_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/accel}/chroots/ (beside ccache's cache), so the
# next run finds it; it is built in a temporary directory and renamed into place, so an
# interrupted build leaves nothing half-made. `run` mounts /proc, /dev, /sys, /tmp and the
# directories the caller needs (the repository, the build directory: $ACCEL_CHROOT_BINDS, colon
# separated, plus $PWD) inside a private mount namespace of its own process: the mounts exist only
# while the command runs and vanish with it on every exit path, SIGKILL included. The command's
# pid is the caller's child's pid (exec all the way), so signals and exit codes pass through.
# Needs root (debootstrap, chroot, mount); `check` says so instead of failing.
set -euo pipefail

suite=trixie
# Each flavour's stamp: bump it when its package list changes (a cached chroot with another stamp
# is rebuilt).
# to build accel, libaccel and their tests against LibTorch 2.6
build_tools=(cmake g++ make ccache pkg-config libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  libspdlog-dev libboost-dev libgtest-dev libgmock-dev zlib1g-dev)
extras=()
if [[ ${1:-} == --cuda ]]; then
  shift
  flavour=cuda components=main,contrib,non-free
  stamp="v1 $suite-cuda libtorch-cuda-dev libnccl-dev nvidia-cuda-toolkit"
  packages=(libtorch-cuda-dev libgloo-cuda-dev libnccl-dev nvidia-cuda-toolkit "${build_tools[@]}")
else
  flavour=torch components=main
  stamp="v2 $suite python3-torch libtorch-dev openmpi-bin"
  packages=(
    # the torch 2.x python client and LibTorch 2.6 with Gloo
    python3-torch python3-yaml libtorch-dev libgloo-dev
    "${build_tools[@]}"
    # Open MPI's mpirun, so that accelerate 1.x's mpirun launcher can be recorded
    # (scripts/accelerate_fixtures) instead of stopping at "mpirun or mpiexec were not found"
    openmpi-bin
  )
  # Added after the stamp's list: installed into a chroot built before them (add_extras), so
  # that a cached chroot is topped up in seconds instead of rebuilt. OpenBLAS: Debian's torch
  # calls whatever libblas.so.3 the alternatives name, else the reference BLAS (~17x slower).
  # etcd-server: trixie's etcd 3.5, so the launcher's etcd tests (run by scripts/torch2_test.sh)
  # speak to 3.5 there as to Debian 12's 3.4 here; libssl-dev, so that they speak TLS to it too;
  # libnghttp2-dev, so that the lease's renewals go over its gRPC (HTTP/2) there too.
  extras=(libopenblas0-pthread etcd-server libssl-dev libnghttp2-dev)
  packages+=("${extras[@]}")
fi

self=$(readlink -f "$0")
cache_dir=${ACCEL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/accel}
root=$cache_dir/chroots/$suite-$flavour
cuda_flag=()
[[ $flavour == cuda ]] && cuda_flag=(--cuda)

die() { echo "torch2_chroot: $*" >&2; exit 1; }

mirror() {
  local uri
  uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n "$uri" ]] || uri=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n "$uri" ]] || die "no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
  echo "$uri"
}

is_built() { [[ -f "$root/.accel-stamp" && "$(cat "$root/.accel-stamp")" == "$stamp" ]]; }

why_unusable() {
  ((EUID == 0)) || { echo "needs root (debootstrap, chroot and mount); running as uid $EUID"; return; }
  command -v unshare >/dev/null || { echo "unshare (util-linux) is missing"; return; }
  is_built || echo "the chroot is not built ($root); run scripts/torch2_chroot.sh ${cuda_flag[*]} ensure"
}

# Runs "$@" in the chroot at $1 with the mounts described above, in a private mount namespace.
enter() {
  local dir=$1
  shift
  local binds="/tmp:${PWD}:${ACCEL_CHROOT_BINDS:-}"
  # shellcheck disable=SC2016
  exec unshare --mount --propagation private -- /bin/sh -c '
    set -e
    dir=$1 binds=$2 cwd=$3
    shift 3
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount --rbind /sys "$dir/sys"
    # This machine'"'"'s names (Gloo resolves the host name to pick its address).
    mount --bind /etc/hosts "$dir/etc/hosts"
    IFS=:
    for b in $binds; do
      # Only real directories below the root: binding / itself would hide the chroot.
      case "$b" in "" | / | /proc* | /dev* | /sys*) continue ;; esac
      [ -d "$b" ] || continue
      mkdir -p "$dir$b"
      mount --bind "$b" "$dir$b"
    done
    unset IFS
    exec chroot "$dir" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$cwd" "$@"
  ' sh "$dir" "$binds" "$PWD" "$@"
}

build() {
  command -v debootstrap >/dev/null || {
    echo "torch2_chroot: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
  }
  local url tmp
  url=$(mirror)
  mkdir -p "$cache_dir/chroots"
  tmp=$(mktemp -d "$cache_dir/chroots/.building-XXXXXX")
  # An interrupted build leaves only this temporary directory, which is removed here.
  trap 'rm -rf --one-file-system "$tmp"' EXIT
  echo "torch2_chroot: debootstrap $suite from $url into $tmp (about a minute)"
  debootstrap --variant=minbase --components="$components" --include=python3,ca-certificates \
    "$suite" "$tmp" "$url" >"$tmp.log" 2>&1 ||
    { tail -20 "$tmp.log" >&2; rm -f "$tmp.log"; die "debootstrap $suite from $url failed"; }
  rm -f "$tmp.log"
  echo "torch2_chroot: installing ${packages[*]} (about 3 minutes)"
  (
    export DEBIAN_FRONTEND=noninteractive ACCEL_CHROOT_BINDS=
    cd /
    # The chroot's _apt user cannot read what root made in it; root downloads (no warning).
    apt=(apt-get -q -o APT::Sandbox::User=root)
    "$self" __enter "$tmp" "${apt[@]}" update >/dev/null
    [[ $flavour == cuda ]] && cudnn_placeholder "$tmp" "${apt[@]}"
    "$self" __enter "$tmp" "${apt[@]}" install -y --no-install-recommends "${packages[@]}" >/dev/null
    "$self" __enter "$tmp" "${apt[@]}" clean
    if [[ $flavour == cuda ]]; then
      "$self" __enter "$tmp" nvcc --version | tail -2
    else
      "$self" __enter "$tmp" /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_available()'
    fi
  ) || die "installing the packages in the $suite-$flavour chroot failed (or its torch cannot import)"
  echo "$stamp" >"$tmp/.accel-stamp"
  rm -rf --one-file-system "$root"
  mv "$tmp" "$root"
  trap - EXIT
  if [[ $flavour == cuda ]]; then
    echo "torch2_chroot: ready at $root (LibTorch 2.6 with CUDA, no cuDNN: builds, does not run)"
  else
    echo "torch2_chroot: ready at $root ($("$self" run /usr/bin/python3 -c 'import torch; print("torch", torch.__version__)' 2>/dev/null))"
  fi
}

# add_extras: installs into the built chroot the extras it lacks (one apt run, none when all are
# there).
add_extras() {
  local missing=() p
  for p in "${extras[@]}"; do
    [[ "$(enter_status "$p")" == "install ok installed" ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "torch2_chroot: adding ${missing[*]} to $root"
  (
    export DEBIAN_FRONTEND=noninteractive ACCEL_CHROOT_BINDS=
    cd /
    apt=(apt-get -q -o APT::Sandbox::User=root)
    "$self" __enter "$root" "${apt[@]}" update >/dev/null
    "$self" __enter "$root" "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
    "$self" __enter "$root" "${apt[@]}" clean
  ) || die "adding ${missing[*]} to the $suite-$flavour chroot failed"
}

# enter_status PACKAGE: its dpkg status in the built chroot ("" when unknown).
enter_status() {
  ACCEL_CHROOT_BINDS= "$self" __enter "$root" dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true
}

# cudnn_placeholder DIR APT...: installs in the chroot at DIR a local package named nvidia-cudnn
# (built with equivs) that stands for Debian's cuDNN installer, which cannot download here.
cudnn_placeholder() {
  local dir=$1 work
  shift
  "$self" __enter "$dir" "$@" install -y --no-install-recommends equivs >/dev/null
  work=$(mktemp -d /tmp/accel-cudnn-XXXXXX)  # /tmp is the same directory inside the chroot
  cat >"$work/nvidia-cudnn.ctl" <<'CTL'
Section: non-free/libs
Priority: optional
Standards-Version: 4.7.0
Package: nvidia-cudnn
Version: 9.0.0.312~cuda12
Description: placeholder for Debian's cuDNN installer (accel's build-only CUDA chroot)
 libtorch-cuda-2.6 depends on nvidia-cudnn, which downloads cuDNN from NVIDIA at install time
 and cannot work on a machine without that access. This package only satisfies the dependency:
 no libcudnn is installed, so programs linked against libtorch_cuda cannot start here.
CTL
  "$self" __enter "$dir" sh -c "cd '$work' && equivs-build nvidia-cudnn.ctl >build.log 2>&1 &&
    dpkg -i '$work'/nvidia-cudnn_*.deb >/dev/null" || { tail -20 "$work/build.log"; rm -rf "$work"; return 1; }
  rm -rf "$work"
}

case "${1:-}" in
  ensure)
    ((EUID == 0)) || die "needs root to build the chroot (debootstrap, chroot, mount)"
    mkdir -p "$cache_dir/chroots"
    # One builder at a time; a second caller waits and then finds it built.
    exec 9>"$cache_dir/chroots/.lock"
    flock 9
    if is_built; then add_extras && echo "torch2_chroot: $root is up to date"; else build; fi
    # Leftovers of builds killed before their trap ran.
    find "$cache_dir/chroots" -maxdepth 1 -name '.building-*' -mmin +60 -exec rm -rf --one-file-system {} + 2>/dev/null || true
    ;;
  path)
    is_built || die "not built: $root"
    echo "$root"
    ;;
  check)
    reason=$(why_unusable)
    [[ -z "$reason" ]] || { echo "torch2 chroot unusable: $reason" >&2; exit 77; }
    ;;
  run)
    shift
    (($#)) || die "run: no command given"
    reason=$(why_unusable)
    [[ -z "$reason" ]] || die "$reason"
    enter "$root" "$@"
    ;;
  __enter)  # internal: enter a chroot that is still being built
    shift
    dir=$1
    shift
    enter "$dir" "$@"
    ;;
  *)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
