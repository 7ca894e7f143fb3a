
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/Unity/unity_0_cxx.cxx" "CMakeFiles/ddpcore.dir/Unity/unity_0_cxx.cxx.o" "gcc" "CMakeFiles/ddpcore.dir/Unity/unity_0_cxx.cxx.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/cmake_pch.hxx" "CMakeFiles/ddpcore.dir/Unity/unity_0_cxx.cxx.o" "gcc" "CMakeFiles/ddpcore.dir/Unity/unity_0_cxx.cxx.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/Unity/unity_1_cxx.cxx" "CMakeFiles/ddpcore.dir/Unity/unity_1_cxx.cxx.o" "gcc" "CMakeFiles/ddpcore.dir/Unity/unity_1_cxx.cxx.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/cmake_pch.hxx" "CMakeFiles/ddpcore.dir/Unity/unity_1_cxx.cxx.o" "gcc" "CMakeFiles/ddpcore.dir/Unity/unity_1_cxx.cxx.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/Unity/unity_2_cxx.cxx" "CMakeFiles/ddpcore.dir/Unity/unity_2_cxx.cxx.o" "gcc" "CMakeFiles/ddpcore.dir/Unity/unity_2_cxx.cxx.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/cmake_pch.hxx" "CMakeFiles/ddpcore.dir/Unity/unity_2_cxx.cxx.o" "gcc" "CMakeFiles/ddpcore.dir/Unity/unity_2_cxx.cxx.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/Unity/unity_3_cxx.cxx" "CMakeFiles/ddpcore.dir/Unity/unity_3_cxx.cxx.o" "gcc" "CMakeFiles/ddpcore.dir/Unity/unity_3_cxx.cxx.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/cmake_pch.hxx" "CMakeFiles/ddpcore.dir/Unity/unity_3_cxx.cxx.o" "gcc" "CMakeFiles/ddpcore.dir/Unity/unity_3_cxx.cxx.o.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/cmake_pch.hxx.cxx" "CMakeFiles/ddpcore.dir/cmake_pch.hxx.gch" "gcc" "CMakeFiles/ddpcore.dir/cmake_pch.hxx.gch.d"
  "/work/wt-aug/build32/CMakeFiles/ddpcore.dir/cmake_pch.hxx" "CMakeFiles/ddpcore.dir/cmake_pch.hxx.gch" "gcc" "CMakeFiles/ddpcore.dir/cmake_pch.hxx.gch.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
