# Empty dependencies file for ddp_fault_shim.
# This may be replaced when dependencies are built.
