# Empty compiler generated dependencies file for ddptrain.
# This may be replaced when dependencies are built.
