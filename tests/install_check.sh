#!/usr/bin/env bash
# `cmake --install` into a scratch prefix, then the installed coli runs the demo model it installed beside
# itself, from another working directory, with nothing of the build or the repository in sight.
# Usage: tests/install_check.sh CMAKE_COMMAND BUILD_DIR
set -euo pipefail
cmake_command=$1
build_dir=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
"$cmake_command" --install "$build_dir" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/coli" || { echo "FAIL: no bin/coli under the prefix"; exit 1; }
test -f "$prefix/share/colibri/models/demo/config.json" || { echo "FAIL: the demo model was not installed"; exit 1; }
cd "$prefix"
out=$(env -u COLI_MODEL "$prefix/bin/coli" run -n 4 --temperature 0 --hot-set none "In the beginning" 2>/dev/null)
[[ -n "$out" ]] || { echo "FAIL: the installed coli generated nothing"; exit 1; }
env -u COLI_MODEL "$prefix/bin/coli" info --hot-set none | grep "^model: *$prefix/share/colibri/models/demo" >/dev/null ||
    { echo "FAIL: the installed coli did not use its installed demo model"; exit 1; }
echo "installed coli runs its demo model"
