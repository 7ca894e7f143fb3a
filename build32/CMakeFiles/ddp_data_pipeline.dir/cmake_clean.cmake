file(REMOVE_RECURSE
  "CMakeFiles/ddp_data_pipeline.dir/bench/data_pipeline.cpp.o"
  "CMakeFiles/ddp_data_pipeline.dir/bench/data_pipeline.cpp.o.d"
  "ddp_data_pipeline"
  "ddp_data_pipeline.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/ddp_data_pipeline.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
