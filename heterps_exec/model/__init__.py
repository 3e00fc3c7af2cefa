"""Zoo graphs as torch modules named by layer, and their cut into pipeline stages."""
