# Writes a C++ header that holds a text file as a char array, so that the binary serves it without the
# source tree. Run as: cmake -DIN=file -DOUT=header -DNAME=kSymbol -P embed_text.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
get_filename_component(source "${IN}" NAME)
file(WRITE "${OUT}"
     "// Generated from ${source} by cmake/embed_text.cmake at build time; edit the source, not this.\n"
     "#pragma once\n\nnamespace coli::server {\n\ninline constexpr char ${NAME}[] = {${bytes} 0x00};\n\n}  // namespace coli::server\n")
