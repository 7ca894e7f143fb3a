
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wt-aug/tests/support/shim/syscall_fault_shim.cpp" "tests/CMakeFiles/ddp_fault_shim.dir/support/shim/syscall_fault_shim.cpp.o" "gcc" "tests/CMakeFiles/ddp_fault_shim.dir/support/shim/syscall_fault_shim.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
