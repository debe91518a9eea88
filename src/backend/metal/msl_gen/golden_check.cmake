# The test that the committed Metal kernels (src/backend/metal/generated) are what the generator makes from
# this tree's Vulkan shaders: the table byte for byte, and the library (about 5 MB, too large to commit) by its
# SHA-256 in kernels.metal.sha256. Run as: cmake -DGENERATED=dir -DCOMMITTED=dir -P golden_check.cmake
set(regen "run scripts/metal_regen.sh and commit the result (review the diff: it is the Metal kernels' change)")
foreach(file kernels.metal kernel_table.cpp)
  if(NOT EXISTS ${GENERATED}/${file})
    message(FATAL_ERROR "${GENERATED}/${file} is missing: build the coli_metal_msl target first")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${GENERATED}/kernel_table.cpp
                        ${COMMITTED}/kernel_table.cpp RESULT_VARIABLE differs)
if(differs)
  message(FATAL_ERROR "src/backend/metal/generated/kernel_table.cpp differs from what the generator makes "
                      "from the Vulkan shaders of this tree (${GENERATED}/kernel_table.cpp): ${regen}")
endif()
file(SHA256 ${GENERATED}/kernels.metal made)
file(STRINGS ${COMMITTED}/kernels.metal.sha256 committed LIMIT_COUNT 1)
if(NOT made STREQUAL committed)
  message(FATAL_ERROR "the Metal library made from this tree's Vulkan shaders (${GENERATED}/kernels.metal, "
                      "SHA-256 ${made}) is not the one src/backend/metal/generated/kernels.metal.sha256 names "
                      "(${committed}): ${regen}")
endif()
message(STATUS "the committed Metal kernels match the Vulkan shaders")
