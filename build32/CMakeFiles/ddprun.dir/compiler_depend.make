# Empty compiler generated dependencies file for ddprun.
# This may be replaced when dependencies are built.
