# Writes a C++ source holding a file's bytes: cmake -DINPUT=f -DOUTPUT=o.cc -DSYMBOL=name -P this.
# Used for the eBPF objects mrc-fabric loads (src/net/bpf): the program carries them, so no
# install path has to be found at run time.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n  "
       bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
     "// Generated from ${INPUT} by cmake/embed_file.cmake: do not edit.\n"
     "#include <cstddef>\n\n"
     "extern const unsigned char ${SYMBOL}[];\n"
     "extern const std::size_t ${SYMBOL}_size;\n"
     "alignas(8) const unsigned char ${SYMBOL}[] = {\n  ${bytes}\n};\n"
     "const std::size_t ${SYMBOL}_size = ${size};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
