# Empty dependencies file for ddptests.
# This may be replaced when dependencies are built.
