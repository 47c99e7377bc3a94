#!/usr/bin/env bash
# Installs every Debian package the project needs (idempotent) and builds a Release tree in
# build/. Programs land in build/bin/.
#   scripts/setup.sh            install + configure + build (Release, build/)
#   MRC_SKIP_APT=1 scripts/setup.sh   skip the package step (already installed)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ clang libclang-rt-14-dev clang-format
  libfmt-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libibverbs-dev
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  # mrc-sim over several processes or machines (optional: found by CMake when installed).
  libopenmpi-dev openmpi-bin
  # src/net/psk.cc: HMAC-SHA256 for the side channel's optional shared secret (mrc-perf --psk);
  # src/net/packet_auth.cc: its X25519 key exchange and HKDF (nettle), and the AES-128-GCM of
  # authenticated packets (OpenSSL's libcrypto: twice nettle's GMAC rate with AVX).
  nettle-dev libssl-dev
  tshark python3-matplotlib python3-numpy
  iproute2 nftables iputils-ping
  # mrc-fabric's eBPF uSID data plane (kernels without SRv6 seg6local): compiled with clang's
  # BPF target against libbpf's helper headers; bpftool for inspecting what is loaded.
  libbpf-dev bpftool
  # The libfabric provider (libmrc-fi.so) and what runs over it: fi_info/fi_pingpong, Open MPI's
  # mtl ofi (openmpi-bin, above).
  libfabric-dev libfabric-bin
  # scripts/bench-net.sh: TCP/MPTCP references (mptcpize is its own package in Debian 12; the
  # in-kernel path manager is driven with `ip mptcp`, so mptcpd itself is not needed) and
  # /usr/bin/time for CPU seconds per run.
  iperf3 mptcpize time
  # scripts/bench-net.sh: oslat (the platform's own freezes, the floor under any stall).
  rt-tests
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${MRC_SKIP_APT:-0}" != 1 ] && [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  # tshark asks whether non-root users may capture; answer no without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${MRC_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${MRC_CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built into $BUILD_DIR/bin"
