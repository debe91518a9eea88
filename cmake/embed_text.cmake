# Writes a C++ header that holds a text file as a char array (NUL-terminated), so that the binary carries
# it without the source tree (the status page, the Metal library's source). Run as:
#   cmake -DIN=file -DOUT=header -DNAME=kSymbol [-DNAMESPACE=coli::server] -P embed_text.cmake
if(NOT NAMESPACE)
  set(NAMESPACE coli::server)
endif()
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
get_filename_component(source "${IN}" NAME)
file(WRITE "${OUT}"
     "// Generated from ${source} by cmake/embed_text.cmake at build time; edit the source, not this.\n"
     "#pragma once\n\nnamespace ${NAMESPACE} {\n\ninline constexpr char ${NAME}[] = {${bytes} 0x00};\n\n}  // namespace ${NAMESPACE}\n")
