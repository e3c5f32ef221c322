#!/bin/bash
# cmake --install of hy into a fresh prefix, then consumers outside the
# tree: a CMake project (find_package(hy)), the same source built with
# pkg-config, and the Python package from the installed location.
#
#   install_test.sh <build dir> <source dir> <work dir> <python>
set -euo pipefail
build=$1 src=$2 work=$3 python=$4
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
test -f "$prefix/lib/cmake/hy/hyConfig.cmake"
test -f "$prefix/include/hy/statestore/store.h"
test -x "$prefix/bin/hyctl"

echo "== find_package(hy)"
cmake -S "$src/tests/install/consumer" -B "$work/cmake-build" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log"
cmake --build "$work/cmake-build" > "$work/cmake-build.log"
"$work/cmake-build/hy_consumer" "$work/store-cmake"

echo "== pkg-config hy"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
"${PKG_CONFIG:-pkg-config}" --exists hy
# shellcheck disable=SC2046
g++ -O1 "$src/tests/install/consumer/main.cc" -o "$work/pc-consumer" \
  $("${PKG_CONFIG:-pkg-config}" --cflags --libs hy)
"$work/pc-consumer" "$work/store-pc"
# The installed hyctl reads what the consumer wrote.
"$prefix/bin/hyctl" verify "$work/store-pc" > /dev/null

echo "== $python -c 'import hystate' from the install"
PYTHONPATH=$prefix/lib/python3/dist-packages "$python" -c "
import hystate, numpy as np
assert hystate.__file__.startswith('$prefix'), hystate.__file__
a = np.arange(6, dtype=np.float32)
hystate.save('$work/py', {'a': a})
b = np.zeros(6, dtype=np.float32)
hystate.load('$work/py', {'a': b})
assert (a == b).all()
print('ok')
"
