# CMake generated Testfile for 
# Source directory: /work/wt-aug
# Build directory: /work/wt-aug/build32
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
subdirs("tests")
