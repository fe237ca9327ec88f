"""Language truth: whether a variant is `seen` only through text of its own language.

The parts of `bench/bench_language_truth.py`: corpora whose contents are known (`corpora`),
real benchmarks in their published formats (`cases`), `audit` runs measured for time and
memory (`runner`), what their audit files say (`truth`), planted copies of every exact kind
(`planted`) and the tables (`tables`).  Audit files are read by the contract's figure names only,
so the same code measures the tool before and after evidence is counted per language.
"""
