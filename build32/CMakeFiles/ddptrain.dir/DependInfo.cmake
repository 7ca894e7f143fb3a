
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wt-aug/app/ddptrain_main.cpp" "CMakeFiles/ddptrain.dir/app/ddptrain_main.cpp.o" "gcc" "CMakeFiles/ddptrain.dir/app/ddptrain_main.cpp.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/cmake_pch.hxx" "CMakeFiles/ddptrain.dir/app/ddptrain_main.cpp.o" "gcc" "CMakeFiles/ddptrain.dir/app/ddptrain_main.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
