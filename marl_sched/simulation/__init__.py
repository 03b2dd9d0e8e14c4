"""The pieces of the discrete-event simulator, one idea a module (``records``,
``events``, ``accounting``, ``queueing``, ``moves``, ``fork``, ``view``); import
:class:`marl_sched.simulator.Simulator` and its names from :mod:`marl_sched.simulator`."""
