# Writes OUT (a C file naming the build's commit) at every build, touching it only when the
# text changes, so a log names the code that wrote it. Run as: cmake -DSRC=.. -DOUT=.. -DVERSION=.. -P version.cmake
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "/* written by cmake/version.cmake at every build */\nconst char dt_build_version[] = \"${VERSION}\";\nconst char dt_build_commit[] = \"${commit}\";\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
