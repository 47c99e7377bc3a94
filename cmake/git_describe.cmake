# Writes `#define MRC_GIT_DESCRIBE "<git describe>"` to OUT, run at every build (not at
# configure time, which would leave the string naming an older commit after new commits).
# The file is rewritten only when the text changes, so an unchanged tree recompiles nothing.
# Usage: cmake -DSRC=<source dir> -DOUT=<header> -P git_describe.cmake
execute_process(COMMAND git describe --always --tags --dirty
                WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE describe
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT describe)
  set(describe "unknown")
endif()
set(text "#define MRC_GIT_DESCRIBE \"${describe}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
