file(REMOVE_RECURSE
  "CMakeFiles/ddprun.dir/app/ddprun_main.cpp.o"
  "CMakeFiles/ddprun.dir/app/ddprun_main.cpp.o.d"
  "ddprun"
  "ddprun.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/ddprun.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
