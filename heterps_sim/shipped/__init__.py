"""Data the wheel ships (no code): scenarios/, examples/, traces/profiles/ and traces/spot/,
links to the repository's folders in a checkout. Look files up with
heterps_sim.inputs.shipped.resolve."""
