file(REMOVE_RECURSE
  "libddpcore.a"
)
