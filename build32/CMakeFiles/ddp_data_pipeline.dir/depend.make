# Empty dependencies file for ddp_data_pipeline.
# This may be replaced when dependencies are built.
