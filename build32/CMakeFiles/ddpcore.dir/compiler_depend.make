# Empty compiler generated dependencies file for ddpcore.
# This may be replaced when dependencies are built.
