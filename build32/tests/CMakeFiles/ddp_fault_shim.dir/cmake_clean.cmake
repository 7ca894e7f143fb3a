file(REMOVE_RECURSE
  "CMakeFiles/ddp_fault_shim.dir/support/shim/syscall_fault_shim.cpp.o"
  "CMakeFiles/ddp_fault_shim.dir/support/shim/syscall_fault_shim.cpp.o.d"
  "libddp_fault_shim.pdb"
  "libddp_fault_shim.so"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/ddp_fault_shim.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
