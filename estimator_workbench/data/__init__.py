"""The data stage of a run: datasets (sources, schema, split, input functions), model inputs
(feature columns for templates), and prediction files."""
