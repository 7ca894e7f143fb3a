file(REMOVE_RECURSE
  "CMakeFiles/ddpcore.dir/Unity/unity_0_cxx.cxx.o"
  "CMakeFiles/ddpcore.dir/Unity/unity_0_cxx.cxx.o.d"
  "CMakeFiles/ddpcore.dir/Unity/unity_1_cxx.cxx.o"
  "CMakeFiles/ddpcore.dir/Unity/unity_1_cxx.cxx.o.d"
  "CMakeFiles/ddpcore.dir/Unity/unity_2_cxx.cxx.o"
  "CMakeFiles/ddpcore.dir/Unity/unity_2_cxx.cxx.o.d"
  "CMakeFiles/ddpcore.dir/Unity/unity_3_cxx.cxx.o"
  "CMakeFiles/ddpcore.dir/Unity/unity_3_cxx.cxx.o.d"
  "CMakeFiles/ddpcore.dir/cmake_pch.hxx.gch"
  "CMakeFiles/ddpcore.dir/cmake_pch.hxx.gch.d"
  "libddpcore.a"
  "libddpcore.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/ddpcore.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
