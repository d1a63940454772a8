"""The records dsprof writes and reads, at the bottom of the layers: every engine imports them, they import no
engine and no PyTorch (tests/test_layers.py holds it so).

- `plan`: `Plan` (which blocks keep their activations, which merge, which spans; plain JSON) and the paper's presets;
- `measurement`: the `Measurement` record and its JSON Lines file;
- `stats`: the statistics of raw samples, paired speed-ups and `Estimate` (a value with its interval);
- `importance`: the importance file `dsprof importance` writes and `dsprof plan --importance` reads.
"""
