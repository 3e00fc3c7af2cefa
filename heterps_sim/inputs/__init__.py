"""From a scenario YAML to a Problem: catalog, model zoo, layer graphs, roofline, validation."""
