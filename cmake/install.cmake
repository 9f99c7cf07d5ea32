# cmake --install: the dtrain command (bin/), libdtrain.a and libdtrain.so.VERSION (lib/), the
# public headers (include/dtrain.h: it includes only <stddef.h> and <stdint.h>; include/dtrain/
# scheme.h and comm.h, for writing schemes: they include <mpi.h>), a pkg-config
# file (lib/pkgconfig/dtrain.pc) and a CMake package (lib/cmake/dtrain: find_package(dtrain)
# gives dtrain::dtrain, the shared library, and dtrain::dtrain_static). Included from
# CMakeLists.txt after the targets are defined.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS dtrain_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS dtrain_static dtrain_shared EXPORT dtrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/dtrain.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# the scheme interface (dtrain/scheme.h, its contract; dtrain/server.h, ranks that serve), the flags it declares (dtrain/flag.h)
# and the counted communication it uses (dtrain/comm.h): <mpi.h>'s flags are dtrain.pc's and
# the package's
install(FILES include/dtrain/scheme.h include/dtrain/comm.h include/dtrain/flag.h include/dtrain/server.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtrain)

# pkg-config: Libs for the shared library; a static link (pkg-config --static) also needs
# MPI, OpenBLAS, zlib and jansson (their own .pc files, Debian names; the cache variable, for
# another MPI or BLAS), xxHash and inih whatever those are, and pthread, m. libxxhash and inih
# are added here, not in the cached default, so that a build folder configured before dtrain
# used them gets them. MPI's Cflags reach the users of dtrain/scheme.h (it includes <mpi.h>):
# pkg-config --cflags dtrain gives those of Requires.private too.
set(DTRAIN_PC_REQUIRES_PRIVATE "mpich openblas zlib jansson" CACHE STRING
    "pkg-config modules libdtrain.a needs (Requires.private of dtrain.pc, with libxxhash and inih)")
set(DTRAIN_PC_REQUIRES "${DTRAIN_PC_REQUIRES_PRIVATE} libxxhash inih")
# oneDNN has no .pc file in Debian: its library and OpenMP's by name
if(DTRAIN_USE_DNNL)
  set(DTRAIN_PC_LIBS_PRIVATE "-ldnnl -lgomp")
endif()
# relocatable: the prefix is found from the .pc file's own place (${pcfiledir}), so that
# `cmake --install build --prefix P` gives a dtrain.pc for P, whatever was configured
file(RELATIVE_PATH DTRAIN_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${PROJECT_SOURCE_DIR}/cmake/dtrain.pc.in ${PROJECT_BINARY_DIR}/dtrain.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dtrain.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CMake package
set(DTRAIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dtrain)
install(EXPORT dtrainTargets NAMESPACE dtrain:: DESTINATION ${DTRAIN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dtrainConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dtrainConfig.cmake INSTALL_DESTINATION ${DTRAIN_CMAKE_DIR})
# 0.x: a minor version may change the interface
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dtrainConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dtrainConfig.cmake ${PROJECT_BINARY_DIR}/dtrainConfigVersion.cmake
        DESTINATION ${DTRAIN_CMAKE_DIR})
