"""Training data for the engine: where the global batches of `heterps-exec run` come from.

    spec = prepare.prepare_data(spec, scenario.data, "s.yaml")  # launcher: bad data exits 2
    stream = readers.open_stream(spec)     # a rank: stream.batch(step), prefetch/next_batch
    scores = score.score_holdout(spec, "state.pt")   # launcher, after: log-loss and AUC

Sources (a scenario's `data:` section, heterps_sim.inputs.data_section):
- `synthetic` (synthetic.py): a generated Criteo-like dataset of .npy files, shuffled per epoch;
- `criteo` (criteo.py): the Criteo text layout, label + 13 integers + 26 hex categoricals;
- `parquet` (parquet.py): any Parquet file, with a column mapping;
- `factory` (factory.py): a user's Python function `pkg.mod:fn` yielding column chunks.
The file and factory sources (sources.py) are read as a stream (stream.py) in bounded
memory; every layout of a plan reads the same global batches. Columns become the model's raw
tensors in columns.py (categorical values hashed into the tables); held-out rows are scored
with log-loss and AUC by score.py, and report.py puts the counts and scores in the result.
criteo_sample.py writes a Criteo-format file from a seed (examples/make_criteo_sample.py).
"""

from heterps_exec.data.synthetic import (
    META,
    BatchStream,
    DatasetError,
    RawTensor,
    generate_dataset,
    raw_tensors,
    zipf_ids,
)

__all__ = ["META", "BatchStream", "DatasetError", "RawTensor", "generate_dataset",
           "raw_tensors", "zipf_ids"]
