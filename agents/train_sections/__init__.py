"""The ``train:`` section in four parts, one module each: :mod:`.ppo` (the algorithm),
:mod:`.data` (the training and validation windows), :mod:`.selection` (validation,
checkpoints, the best one) and :mod:`.warm_start` (behaviour cloning, DAgger).
:class:`agents.config.TrainConfig` inherits from all four, so the keys stay flat.
"""
