"""Where the pipeline's files live: local folders or a bucket (URIs, the $AUDIOSCALE_HOME layout,
checks that a destination is writable and a bucket reachable, copying a stored folder down)."""
