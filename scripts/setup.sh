#!/usr/bin/env bash
# Installs every Debian package accel needs to build, test, benchmark and demo.
# Idempotent and non-interactive: packages already present are not touched, and apt is
# only called when something is missing.
set -euo pipefail

packages=(
  # build
  cmake g++ make ccache pkg-config clang-format-14
  dpkg-dev  # scripts/package: cpack's Debian package (dpkg-shlibdeps)
  # libraries of the CLI and launcher
  libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  libboost-dev libboost-filesystem-dev
  # worker library: LibTorch (CPU, c10d + Gloo)
  libtorch-dev libgloo-dev zlib1g-dev
  # tests
  libgtest-dev libgmock-dev python3-torch python3-yaml python3-packaging clang libclang-rt-14-dev
  # a real BLAS under Debian's torch (BLAS_INFO=generic: it calls whatever libblas.so.3 the
  # alternatives name; without this, the reference BLAS, ~16x slower for fp32 training)
  libopenblas0-pthread
  # example data, benchmarks, scheduler and multi-host tests
  dataset-fashion-mnist hyperfine time slurm-wlm munge openmpi-bin libopenmpi-dev iproute2
  # rendezvous on etcd (issue 34): tests start members of their own, never the service; TLS to
  # etcd (libssl-dev) with certificates the tests make (openssl)
  etcd-server etcd-client libssl-dev openssl
  # HTTP/2 to etcd's gRPC: the lease's renewals on one kept stream (nghttp2)
  libnghttp2-dev
  # torchrun's etcd-v2 backend, the reference of scripts/bench/etcd_recovery.sh
  python3-etcd
  # scripts/bench/plot_scale.sh's plot of the rendezvous at scale
  gnuplot-nox
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
