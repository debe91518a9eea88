# The Metal backend: a known name, not written yet (its entry says so), and its kernels.
coli_backend_add(metal)

# The Metal kernels (kernel_table.h): the committed table of the generated library is plain C++, built in
# every build, so that any host (and its tests) reads the same table a Mac's build embeds.
set(coli_metal_dir ${CMAKE_CURRENT_LIST_DIR})
add_library(coli_metal_kernels STATIC ${coli_metal_dir}/generated/kernel_table.cpp)
target_include_directories(coli_metal_kernels PUBLIC ${CMAKE_SOURCE_DIR}/src)

# The Metal host (host.h): its portable part and the devices this build has: Metal itself on Apple
# (host_apple.mm, -DCOLI_METAL=ON), and the Metal-shaped device on Vulkan wherever the
# Vulkan backend is built (host_vulkan.cpp: the tests run the kernels through their Metal bindings on
# lavapipe). host_absent.cpp says why for the others.
option(COLI_METAL "The Metal host (macOS: needs Metal.framework, and -DCOLI_VULKAN=ON for the kernels)" OFF)
if(COLI_METAL AND NOT APPLE)
  message(FATAL_ERROR "COLI_METAL=ON needs macOS (Metal.framework); configure without it. On Linux the Metal "
                      "host's portable part is tested on Vulkan (-DCOLI_VULKAN=ON, the Metal-shaped Vulkan device)")
endif()
add_library(coli_metal_host STATIC ${coli_metal_dir}/host.cpp ${coli_metal_dir}/host_absent.cpp
                            ${coli_metal_dir}/self_test.cpp)
target_link_libraries(coli_metal_host PUBLIC coli_metal_kernels coli_backend)
if(COLI_VULKAN)
  target_sources(coli_metal_host PRIVATE ${coli_metal_dir}/host_vulkan.cpp)
  target_link_libraries(coli_metal_host PUBLIC coli_backend_vulkan)
  target_compile_definitions(coli_metal_host PRIVATE COLI_METAL_HOST_VULKAN=1)
endif()
if(COLI_METAL)
  enable_language(OBJCXX)
  target_sources(coli_metal_host PRIVATE ${coli_metal_dir}/host_apple.mm)
  set_source_files_properties(${coli_metal_dir}/host_apple.mm PROPERTIES COMPILE_OPTIONS -fobjc-arc)
  target_link_libraries(coli_metal_host PUBLIC "-framework Metal" "-framework Foundation")
  target_compile_definitions(coli_metal_host PRIVATE COLI_METAL_HOST_APPLE=1)
endif()

# The generator (msl_gen/) remakes both files from the Vulkan build's SPIR-V with SPIRV-Cross, and a test
# compares them with the committed ones. It needs the Vulkan shaders and Debian's libspirv-cross-c-shared-dev
# (SPIRV-Cross's headers and static C++ libraries).
option(COLI_METAL_MSL
       "Generate the Metal kernels from the Vulkan SPIR-V and test the committed ones (needs COLI_VULKAN, SPIRV-Cross)"
       ${COLI_VULKAN})
if(COLI_METAL AND NOT COLI_METAL_MSL)
  message(FATAL_ERROR "COLI_METAL=ON embeds the generated Metal library: it needs -DCOLI_METAL_MSL=ON (with "
                      "-DCOLI_VULKAN=ON, glslc and SPIRV-Cross)")
endif()
if(NOT COLI_METAL_MSL)
  return()
endif()
if(NOT COLI_VULKAN)
  message(FATAL_ERROR "COLI_METAL_MSL=ON needs the Vulkan shaders: configure with -DCOLI_VULKAN=ON, or "
                      "-DCOLI_METAL_MSL=OFF")
endif()
find_package(spirv_cross_core CONFIG QUIET)
find_package(spirv_cross_glsl CONFIG QUIET)
find_package(spirv_cross_msl CONFIG QUIET)
if(NOT TARGET spirv-cross-msl OR NOT TARGET spirv-cross-glsl OR NOT TARGET spirv-cross-core)
  message(FATAL_ERROR "COLI_METAL_MSL=ON (the default with COLI_VULKAN) but SPIRV-Cross was not found: install "
                      "it (Debian: apt install libspirv-cross-c-shared-dev) or configure with -DCOLI_METAL_MSL=OFF")
endif()

file(GLOB coli_msl_gen_srcs CONFIGURE_DEPENDS ${coli_metal_dir}/msl_gen/*.cpp)
list(FILTER coli_msl_gen_srcs EXCLUDE REGEX "/main\\.cpp$")
add_library(coli_msl_gen_lib STATIC ${coli_msl_gen_srcs})  # the generator, and its tests (tests/metal_gen)
target_include_directories(coli_msl_gen_lib PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(coli_msl_gen_lib PUBLIC spirv-cross-msl spirv-cross-glsl spirv-cross-core fmt::fmt)
add_executable(coli_msl_gen ${coli_metal_dir}/msl_gen/main.cpp)
target_link_libraries(coli_msl_gen PRIVATE coli_msl_gen_lib)

# The Vulkan build's shaders are listed once vulkan/backend.cmake has run (it is included after this file).
function(coli_metal_msl_rules)
  get_property(shaders GLOBAL PROPERTY COLI_VULKAN_SPIRV)
  set(gen ${CMAKE_BINARY_DIR}/generated/metal)
  set(manifest "")
  set(incs)
  foreach(s ${shaders})
    string(REPLACE "|" ";" parts "${s}")
    list(GET parts 0 name)
    list(GET parts 1 path)
    string(APPEND manifest "${name} ${path}\n")
    list(APPEND incs ${path})
  endforeach()
  file(WRITE ${gen}/shaders.txt.in "${manifest}")
  configure_file(${gen}/shaders.txt.in ${gen}/shaders.txt COPYONLY)
  add_custom_command(OUTPUT ${gen}/kernels.metal ${gen}/kernel_table.cpp
                     COMMAND coli_msl_gen ${gen}/shaders.txt ${gen}/kernels.metal ${gen}/kernel_table.cpp
                     DEPENDS coli_msl_gen ${gen}/shaders.txt ${incs}
                     COMMENT "coli_msl_gen: the Metal kernels"
                     VERBATIM)
  add_custom_target(coli_metal_msl ALL DEPENDS ${gen}/kernels.metal ${gen}/kernel_table.cpp)
  # The library's source in the binary (library_source.h): Metal on Apple compiles it at start; elsewhere
  # the tests check that the embedded text is the generated one.
  add_custom_command(OUTPUT ${gen}/library_source_text.h
                     COMMAND ${CMAKE_COMMAND} -DIN=${gen}/kernels.metal -DOUT=${gen}/library_source_text.h
                             -DNAME=kMetalLibrarySource -DNAMESPACE=coli::metal
                             -P ${CMAKE_SOURCE_DIR}/cmake/embed_text.cmake
                     DEPENDS ${gen}/kernels.metal ${CMAKE_SOURCE_DIR}/cmake/embed_text.cmake
                     COMMENT "the Metal library's source, embedded"
                     VERBATIM)
  add_library(coli_metal_source STATIC ${coli_metal_dir}/library_source.cpp ${gen}/library_source_text.h)
  target_include_directories(coli_metal_source PUBLIC ${CMAKE_SOURCE_DIR}/src PRIVATE ${CMAKE_BINARY_DIR}/generated)
  if(COLI_METAL)
    target_link_libraries(coli_metal_host PUBLIC coli_metal_source)
  endif()
  if(COLI_TESTS)
    add_test(NAME metal_msl_golden
             COMMAND ${CMAKE_COMMAND} -DGENERATED=${gen} -DCOMMITTED=${coli_metal_dir}/generated
                     -P ${coli_metal_dir}/msl_gen/golden_check.cmake)
    set_tests_properties(metal_msl_golden PROPERTIES LABELS backend)
  endif()
endfunction()
cmake_language(DEFER CALL coli_metal_msl_rules)
