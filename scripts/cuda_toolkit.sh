#!/usr/bin/env bash
# Assembles a CUDA 12 toolkit in DEST without installing anything system-wide: nvcc and its
# compilers from Debian trixie's nvidia-cuda-toolkit .debs (fetched through a private apt
# configuration, unpacked with dpkg-deb -x), headers and libcudart from PyPI's CUDA wheels, and
# CUPTI under extras/CUPTI as the runfile toolkit (Colab's) lays it out.
#
#   scripts/cuda_toolkit.sh VERSION DEST      e.g. scripts/cuda_toolkit.sh 12.4 ~/.cache/perfcore/cuda-12.4
#
# Downloads are kept in $PERFCORE_CACHE (default ~/.cache/perfcore) between runs; a DEST that is
# already complete is left as it is, so a second run takes a second.
set -euo pipefail

usage() { echo "usage: $0 VERSION DEST (VERSION: 12.4, the CUDA 12 nvcc Debian ships)" >&2; exit 2; }
[ $# -eq 2 ] || usage
VERSION=$1
DEST=$2
# PyPI has no CUDA 12 nvcc (its nvcc wheels carry ptxas and libnvvm only), and Debian trixie's
# nvidia-cuda-toolkit is the one CUDA 12 nvcc the registries here offer: 12.4.
case "$VERSION" in
  12.4) DEB_VERSION=12.4.131~12.4.1-2 ;;
  *) echo "cuda_toolkit: no CUDA $VERSION nvcc in Debian's packages (trixie has 12.4); run it with 12.4" >&2; exit 2 ;;
esac
CACHE=${PERFCORE_CACHE:-$HOME/.cache/perfcore}/cuda-toolkit
STAMP="$DEST/.perfcore-cuda-toolkit"
want="cuda $VERSION nvcc $DEB_VERSION"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && "$DEST/bin/nvcc" --version >/dev/null 2>&1; then
  echo "cuda_toolkit: $DEST already has CUDA $VERSION"
  exit 0
fi
# Only a folder this script made (its stamp) or an empty one is replaced.
if [ -e "$DEST" ] && [ ! -f "$STAMP" ] && [ -n "$(ls -A "$DEST" 2>/dev/null)" ]; then
  echo "cuda_toolkit: $DEST exists and was not made by this script; give an empty or new folder" >&2
  exit 2
fi
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
  || { echo "cuda_toolkit: needs apt-get and dpkg-deb (a Debian or Ubuntu machine)" >&2; exit 1; }
PY=${PYTHON:-python3}
mkdir -p "$CACHE"

# --- Debian: nvcc, cicc, ptxas, fatbinary, nvlink, libdevice -------------------------------------
# A private apt root (scripts/private_apt.sh): only `apt-get update` and `apt-get download` run.
APT="$CACHE/apt"
DEBS="$CACHE/debs"
mkdir -p "$DEBS"
. "$(dirname "$0")/private_apt.sh"
private_apt "$APT" "deb http://deb.debian.org/debian trixie main contrib non-free"
deb_file="$DEBS/nvidia-cuda-toolkit_${DEB_VERSION/:/%3a}_amd64.deb"
if [ ! -s "$deb_file" ]; then
  echo "cuda_toolkit: fetching Debian's nvidia-cuda-toolkit $DEB_VERSION (87 MB, once)"
  APT_CONFIG="$APT/apt.conf" apt-get -qq update
  (cd "$DEBS" && APT_CONFIG="$APT/apt.conf" apt-get -qq download "nvidia-cuda-toolkit=$DEB_VERSION")
fi
[ -s "$deb_file" ] || { echo "cuda_toolkit: apt-get download left no $deb_file" >&2; exit 1; }

# --- PyPI: headers, libcudart, CUPTI --------------------------------------------------------------
WHEELS="$CACHE/wheels-$VERSION"
mkdir -p "$WHEELS"
specs=("nvidia-cuda-runtime-cu12==$VERSION.*" "nvidia-cuda-cccl-cu12==$VERSION.*"
       "nvidia-cuda-nvcc-cu12==$VERSION.*" "nvidia-cuda-cupti-cu12==$VERSION.*")
for spec in "${specs[@]}"; do
  name=${spec%%==*}
  if ! ls "$WHEELS/${name//-/_}-$VERSION".*.whl >/dev/null 2>&1; then
    echo "cuda_toolkit: fetching $spec"
    "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      -d "$WHEELS" "$spec" 2>&1 | grep -v "^WARNING: Location" || true
    ls "$WHEELS/${name//-/_}-$VERSION".*.whl >/dev/null 2>&1 || { echo "cuda_toolkit: pip could not fetch $spec" >&2; exit 1; }
  fi
done

# --- Assemble in a scratch folder, then move into place ------------------------------------------
TMP="$DEST.partial"
rm -rf "$TMP"
mkdir -p "$TMP"/{bin/crt,nvvm/bin,nvvm/libdevice,include,lib64,extras/CUPTI/include,extras/CUPTI/lib64}
X="$TMP/.deb"
dpkg-deb -x "$deb_file" "$X"
TK="$X/usr/lib/nvidia-cuda-toolkit"
# Debian's /usr/bin/nvcc is a shell wrapper and its nvcc.profile points at /usr/lib: take the ELF
# programs and give nvcc a profile relative to itself, as the runfile toolkit has.
cp "$TK/bin/nvcc" "$TMP/bin/nvcc"
cp "$TK/bin/cicc" "$TMP/nvvm/bin/cicc"
cp "$TK/bin/crt/"*.stub "$TMP/bin/crt/"
for tool in ptxas fatbinary nvlink cudafe++ bin2c cuobjdump nvprune nvdisasm cu++filt; do
  cp "$X/usr/bin/$tool" "$TMP/bin/$tool"
done
cp "$TK/libdevice/libdevice.10.bc" "$TMP/nvvm/libdevice/"
cat >"$TMP/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
rm -rf "$X"

unwheel() {  # $1 = wheel name prefix, $2 = folder inside nvidia/ to take
  local whl d
  whl=$(ls "$WHEELS/$1-$VERSION".*.whl | head -1)
  d="$TMP/.whl"
  rm -rf "$d"
  "$PY" -m zipfile -e "$whl" "$d"
  echo "$d/nvidia/$2"
}
rt=$(unwheel nvidia_cuda_runtime_cu12 cuda_runtime)
cp -r "$rt/include/." "$TMP/include/"
cp -P "$rt/lib/"libcudart.so* "$TMP/lib64/"
cc=$(unwheel nvidia_cuda_cccl_cu12 cuda_cccl)
cp -r "$cc/include/." "$TMP/include/"
nv=$(unwheel nvidia_cuda_nvcc_cu12 cuda_nvcc)
cp -r "$nv/include/." "$TMP/include/"
cu=$(unwheel nvidia_cuda_cupti_cu12 cuda_cupti)
cp -r "$cu/include/." "$TMP/extras/CUPTI/include/"
cp -P "$cu/lib/"libcupti.so* "$TMP/extras/CUPTI/lib64/"
rm -rf "$TMP/.whl"
find "$TMP/include" "$TMP/extras" -name "__init__.py" -delete
# The wheels carry only the versioned sonames; the linker's -lcudart / -lcupti want the plain names.
(cd "$TMP/lib64" && ln -sf "$(ls libcudart.so.* | head -1)" libcudart.so)
(cd "$TMP/extras/CUPTI/lib64" && ln -sf "$(ls libcupti.so.* | head -1)" libcupti.so)
chmod +x "$TMP"/bin/* "$TMP/nvvm/bin/cicc"

"$TMP/bin/nvcc" --version | grep -q "release $VERSION" \
  || { echo "cuda_toolkit: the assembled nvcc does not run or is not $VERSION:" >&2; "$TMP/bin/nvcc" --version >&2; exit 1; }
echo "$want" >"$TMP/.perfcore-cuda-toolkit"
rm -rf "$DEST"
mv "$TMP" "$DEST"
echo "cuda_toolkit: CUDA $VERSION toolkit in $DEST (nvcc $("$DEST/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
