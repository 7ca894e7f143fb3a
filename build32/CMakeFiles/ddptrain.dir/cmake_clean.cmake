file(REMOVE_RECURSE
  "CMakeFiles/ddptrain.dir/app/ddptrain_main.cpp.o"
  "CMakeFiles/ddptrain.dir/app/ddptrain_main.cpp.o.d"
  "ddptrain"
  "ddptrain.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/ddptrain.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
