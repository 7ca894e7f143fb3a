file(REMOVE_RECURSE
  "CMakeFiles/ddptests.dir/Unity/unity_0_cxx.cxx.o"
  "CMakeFiles/ddptests.dir/Unity/unity_0_cxx.cxx.o.d"
  "CMakeFiles/ddptests.dir/Unity/unity_1_cxx.cxx.o"
  "CMakeFiles/ddptests.dir/Unity/unity_1_cxx.cxx.o.d"
  "CMakeFiles/ddptests.dir/Unity/unity_2_cxx.cxx.o"
  "CMakeFiles/ddptests.dir/Unity/unity_2_cxx.cxx.o.d"
  "CMakeFiles/ddptests.dir/Unity/unity_3_cxx.cxx.o"
  "CMakeFiles/ddptests.dir/Unity/unity_3_cxx.cxx.o.d"
  "ddptests"
  "ddptests.pdb"
  "ddptests[1]_tests.cmake"
  "ddptests[2]_tests.cmake"
  "ddptests[3]_tests.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/ddptests.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
